package imagestore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/containers/image/v5/pkg/sysregistriesv2"
	"github.com/containers/image/v5/types"
)

// defaultRegistriesConf searches no registry for short names (so a short name
// means a local image, localhost/NAME first) and marks no registry insecure:
// as with Podman's defaults, a plain-HTTP registry (on this host too) is
// reached only when the request says tlsVerify=false, and without it the
// push or pull fails naming the TLS problem instead of falling back to
// HTTP. (The Docker API applies dockerd's loopback default itself.)
const defaultRegistriesConf = `# Written by berth-engine on first start; edit freely, the engine keeps it.
# A registry listed with insecure = true is reached without TLS verification
# (and over plain HTTP) even when a request does not say tlsVerify=false.
unqualified-search-registries = []
short-name-mode = "permissive"
`

// defaultPolicy accepts any image: the engine has no trust configuration of its own.
const defaultPolicy = `{"default":[{"type":"insecureAcceptAnything"}],"transports":{"docker-daemon":{"":[{"type":"insecureAcceptAnything"}]}}}
`

// writeDefaultRegistriesConf writes the engine's registries.conf unless one exists.
func writeDefaultRegistriesConf(path string) error {
	return writeIfMissing(path, defaultRegistriesConf)
}

// writeDefaultPolicy writes the engine's signature policy unless one exists.
func writeDefaultPolicy(path string) error {
	return writeIfMissing(path, defaultPolicy)
}

// writeIfMissing creates path with content atomically, leaving an existing file alone.
func writeIfMissing(path, content string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(content); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// searchRegistries reads the unqualified-search registries of sys's registries.conf.
func searchRegistries(sys *types.SystemContext) ([]string, error) {
	// containers/image caches parsed files per process; read the file as it is now.
	sysregistriesv2.InvalidateCache()
	regs, err := sysregistriesv2.UnqualifiedSearchRegistries(sys)
	if err != nil {
		return nil, fmt.Errorf("reading unqualified-search-registries: %w", err)
	}
	return regs, nil
}
