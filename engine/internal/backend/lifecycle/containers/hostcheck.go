package containers

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/berth-project/berth/engine/internal/backend/execution/oci"
	"github.com/berth-project/berth/engine/internal/backend/execution/runtime"
	"github.com/berth-project/berth/engine/internal/core"
)

// checkOnHost checks what a request names on this host, which
// ContainerSpec.Validate cannot: each sysctl exists, a netns path is a
// network namespace, the cpuset's CPUs exist. Create runs it so that what
// it accepts, start can run, and start runs it again (the host may have
// changed in between) so that such a failure is the client's 400, not a
// runtime error.
func checkOnHost(s *core.ContainerSpec) error {
	for key := range s.Sysctl {
		path := filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
		if _, err := os.Stat(path); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return core.InvalidArgument("sysctl", fmt.Errorf("%s does not exist on this host", key))
			}
			return core.InvalidArgument("sysctl", err)
		}
	}
	if s.LogDriver() == core.LogDriverJournald {
		if err := runtime.Journald(); err != nil {
			return core.InvalidArgument("log_configuration.driver", err)
		}
	}
	if err := checkRootfs(s); err != nil {
		return err
	}
	for _, d := range s.Devices {
		if core.IsCDIDevice(d.Path) {
			continue // the CDI registry's (checkCDI)
		}
		if _, err := oci.ResolveDevice(d.Path); err != nil {
			return err
		}
	}
	if s.NetNS.NSMode == "path" {
		if err := isNetNS(s.NetNS.Value); err != nil {
			return core.InvalidArgument("netns", err)
		}
	}
	if r := s.Resources; r != nil && r.CPU != nil && r.CPU.Cpus != "" {
		want, err := core.CPUSetMax(r.CPU.Cpus)
		if err != nil {
			return core.InvalidArgument("resource_limits.cpu.cpus", err)
		}
		if online, err := os.ReadFile("/sys/devices/system/cpu/online"); err == nil {
			if have, err := core.CPUSetMax(string(online)); err == nil && want > have {
				return core.InvalidArgument("resource_limits.cpu.cpus", fmt.Errorf("CPU %d is not online (online: %s)", want, strings.TrimSpace(string(online))))
			}
		}
	}
	return nil
}

// isNetNS reports whether path is a network namespace (a bind mount of one,
// or /proc/PID/ns/net).
func isNetNS(path string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("%s does not exist", path)
		}
		return fmt.Errorf("%s: %w", path, err)
	}
	if st.Type != unix.NSFS_MAGIC {
		return fmt.Errorf("%s is not a namespace", path)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer unix.Close(fd)
	// NS_GET_NSTYPE answers the namespace's CLONE_NEW* flag.
	kind, err := unix.IoctlRetInt(fd, unix.NS_GET_NSTYPE)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if kind != unix.CLONE_NEWNET {
		return fmt.Errorf("%s is not a network namespace", path)
	}
	return nil
}
