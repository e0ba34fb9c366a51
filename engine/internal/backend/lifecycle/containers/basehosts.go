package containers

import (
	"errors"
	"fmt"
	"io"
	"os"

	securejoin "github.com/cyphar/filepath-securejoin"
	"golang.org/x/sys/unix"

	"github.com/berth-project/berth/engine/internal/core"
)

// maxBaseHosts is the most of a base hosts file that is read.
const maxBaseHosts = 1 << 20

// baseHosts is what a container's generated /etc/hosts starts from (its
// base_hosts_file, Podman 5 and 6's --hosts-file): nothing, the image's
// /etc/hosts (opened inside the container's root, so that no link in it
// leads out) or a file of the engine's host. A missing image file is an
// empty base, as Podman reads it.
func baseHosts(rec *record) (string, error) {
	var f *os.File
	var err error
	switch b := rec.Spec.BaseHostsFile; b {
	case "", "none":
		return "", nil
	case "image":
		f, err = securejoin.OpenInRoot(rec.Rootfs, "/etc/hosts")
		if errors.Is(err, os.ErrNotExist) {
			return "", nil
		}
		if err == nil {
			// OpenInRoot answers an O_PATH handle: reopen it to read.
			var r *os.File
			r, err = securejoin.Reopen(f, unix.O_RDONLY)
			f.Close()
			f = r
		}
	default:
		f, err = os.Open(b)
	}
	if err != nil {
		return "", core.InvalidArgument("base_hosts_file", fmt.Errorf("read %s: %w", rec.Spec.BaseHostsFile, err))
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return "", core.InvalidArgument("base_hosts_file", fmt.Errorf("%s is not a regular file", rec.Spec.BaseHostsFile))
	}
	data, err := io.ReadAll(io.LimitReader(f, maxBaseHosts))
	if err != nil {
		return "", core.InvalidArgument("base_hosts_file", err)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		data = append(data, '\n')
	}
	return string(data), nil
}
