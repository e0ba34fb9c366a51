package containers

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/core"
)

// initPath is where a container's init binary appears, as with Podman.
const initPath = "/run/podman-init"

// defaultInitBinaries are where catatonit is looked for when the request
// names no init_path: Debian's package, then Podman's libexec directory.
var defaultInitBinaries = []string{"/usr/bin/catatonit", "/usr/libexec/podman/catatonit"}

// initBinary returns the read-only bind mount of the init binary (catatonit)
// at /run/podman-init for a container created with init; the process then
// runs as "/run/podman-init -- COMMAND", so the init is PID 1, reaps zombies
// and forwards signals.
func initBinary(spec *core.ContainerSpec) ([]specs.Mount, error) {
	if !spec.Init {
		if spec.InitPath != "" {
			return nil, core.InvalidArgument("init_path", fmt.Errorf("%q is set but init is not", spec.InitPath))
		}
		return nil, nil
	}
	path := spec.InitPath
	if path == "" {
		for _, p := range defaultInitBinaries {
			if _, err := os.Stat(p); err == nil {
				path = p
				break
			}
		}
		if path == "" {
			found, err := exec.LookPath("catatonit")
			if err != nil {
				return nil, core.InvalidArgument("init", fmt.Errorf("no init binary: catatonit is not installed (%v)", defaultInitBinaries))
			}
			path = found
		}
	}
	if !filepath.IsAbs(path) {
		return nil, core.InvalidArgument("init_path", fmt.Errorf("%q is not an absolute path", path))
	}
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		return nil, core.InvalidArgument("init_path", fmt.Errorf("%s is not an executable file", path))
	}
	return []specs.Mount{{Destination: initPath, Type: "bind", Source: path, Options: []string{"bind", "rprivate", "ro"}}}, nil
}

// proxyVariables are the environment variables a container gets from the
// engine when its request sets httpproxy, as with Podman.
var proxyVariables = []string{"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "ftp_proxy", "FTP_PROXY", "no_proxy", "NO_PROXY"}

// proxyEnv returns the engine's own proxy variables as "NAME=value".
func proxyEnv() []string {
	var out []string
	for _, name := range proxyVariables {
		if v, ok := os.LookupEnv(name); ok {
			out = append(out, name+"="+v)
		}
	}
	return out
}
