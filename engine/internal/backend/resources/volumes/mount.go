package volumes

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/berth-project/berth/engine/internal/core"
)

// mountSpec is how a volume with mount options is mounted on its _data
// directory while containers use it: a tmpfs (type=tmpfs) or a bind mount
// of a host directory (o=bind, device=DIR).
type mountSpec struct {
	fstype string
	source string
	flags  uintptr
	data   string
	bind   bool
}

// parseMountOptions reads the local driver's type, device and o options.
// It answers nil for a volume that is a plain directory.
func parseMountOptions(opts map[string]string) (*mountSpec, error) {
	var typ, device, o string
	for k, v := range opts {
		switch strings.ToLower(k) {
		case "type":
			typ = v
		case "device":
			device = v
		case "o":
			o = v
		}
	}
	ms := &mountSpec{fstype: typ, source: device}
	var data []string
	for _, opt := range strings.Split(o, ",") {
		key, val, hasVal := strings.Cut(opt, "=")
		switch {
		case opt == "" || opt == "copy" || opt == "nocopy":
		case opt == "bind" || opt == "rbind":
			ms.bind = true
			if opt == "rbind" {
				ms.flags |= unix.MS_REC
			}
		case opt == "nodev":
			ms.flags |= unix.MS_NODEV
		case opt == "noexec":
			ms.flags |= unix.MS_NOEXEC
		case opt == "nosuid":
			ms.flags |= unix.MS_NOSUID
		case opt == "ro":
			ms.flags |= unix.MS_RDONLY
		case opt == "rw" || opt == "dev" || opt == "exec" || opt == "suid":
		case hasVal && (key == "size" || key == "mode" || key == "nr_inodes" || key == "uid" || key == "gid"):
			if val == "" || strings.ContainsAny(val, ", ") {
				return nil, core.InvalidArgument("Options", fmt.Errorf("mount option %q needs a value", opt))
			}
			data = append(data, opt)
		default:
			return nil, core.InvalidArgument("Options", fmt.Errorf("mount option %q is not supported by the local driver (bind, rbind, nodev, noexec, nosuid, dev, exec, suid, ro, rw, size=, mode=, nr_inodes=, uid=, gid=, copy, nocopy)", opt))
		}
	}
	ms.data = strings.Join(data, ",")
	switch {
	case typ == "" && device == "" && !ms.bind && ms.flags == 0 && ms.data == "":
		return nil, nil
	case typ == "" && device == "" && !ms.bind && ms.flags == 0 && onlyOwner(data):
		// o=uid=N,gid=N without a type: a plain directory with that owner
		// (Create sets it), as Podman's local driver makes it.
		return nil, nil
	case typ == "tmpfs":
		if ms.bind {
			return nil, core.InvalidArgument("Options", errors.New("a tmpfs volume cannot be a bind mount"))
		}
		if device == "" {
			ms.source = "tmpfs"
		}
		return ms, nil
	case ms.bind && (typ == "" || typ == "none"):
		if ms.data != "" {
			return nil, core.InvalidArgument("Options", errors.New("size, mode, nr_inodes, uid and gid are tmpfs options"))
		}
		if !filepath.IsAbs(device) {
			return nil, core.InvalidArgument("Options", fmt.Errorf("a bind volume needs device=ABSOLUTE_DIRECTORY, not %q", device))
		}
		fi, err := os.Stat(device)
		if err != nil || !fi.IsDir() {
			return nil, core.InvalidArgument("Options", fmt.Errorf("device %s is not a directory", device))
		}
		ms.fstype = ""
		return ms, nil
	case typ == "":
		return nil, core.InvalidArgument("Options", errors.New("mount options need type=tmpfs, or o=bind with device= (without a type, o takes only uid= and gid=)"))
	default:
		return nil, core.InvalidArgument("Options", fmt.Errorf("volume type %q is not supported (tmpfs, or o=bind with device=)", typ))
	}
}

// onlyOwner reports whether the o= data options are uid= and gid= alone.
func onlyOwner(data []string) bool {
	for _, opt := range data {
		if key, _, _ := strings.Cut(opt, "="); key != "uid" && key != "gid" {
			return false
		}
	}
	return true
}

// directoryOwner is the owner o=uid=N,gid=N gives a volume that is a plain
// directory; set says whether either is named.
func directoryOwner(opts map[string]string) (uid, gid int, set bool, err error) {
	if optionValue(opts, "type") != "" || optionValue(opts, "device") != "" {
		return 0, 0, false, nil
	}
	for _, opt := range strings.Split(optionValue(opts, "o"), ",") {
		key, val, _ := strings.Cut(opt, "=")
		if key != "uid" && key != "gid" {
			continue
		}
		n, err := strconv.Atoi(val)
		if err != nil || n < 0 {
			return 0, 0, false, core.InvalidArgument("Options", fmt.Errorf("o=%s: %q must be a non-negative number", key, val))
		}
		if key == "uid" {
			uid = n
		} else {
			gid = n
		}
		set = true
	}
	return uid, gid, set, nil
}

// Mount mounts a volume that has mount options on its _data directory,
// unless it is mounted already; a plain volume needs nothing. The container
// backend calls it before a container using the volume starts.
func (s *Store) Mount(ctx context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, err := s.get(ctx, name)
	if err != nil {
		return err
	}
	ms, err := parseMountOptions(v.Options)
	if err != nil || ms == nil {
		return err
	}
	if mounted(v.Mountpoint) {
		return nil
	}
	if ms.bind {
		if err := unix.Mount(ms.source, v.Mountpoint, "", unix.MS_BIND|(ms.flags&unix.MS_REC), ""); err != nil {
			return fmt.Errorf("volume %s: bind mount %s: %w", name, ms.source, err)
		}
		if rest := ms.flags &^ unix.MS_REC; rest != 0 {
			if err := unix.Mount("", v.Mountpoint, "", unix.MS_BIND|unix.MS_REMOUNT|rest, ""); err != nil {
				unix.Unmount(v.Mountpoint, unix.MNT_DETACH)
				return fmt.Errorf("volume %s: remount with its options: %w", name, err)
			}
		}
		return nil
	}
	if err := unix.Mount(ms.source, v.Mountpoint, ms.fstype, ms.flags, ms.data); err != nil {
		return fmt.Errorf("volume %s: mount %s: %w", name, ms.fstype, err)
	}
	if v.UID != 0 || v.GID != 0 {
		if err := os.Chown(v.Mountpoint, v.UID, v.GID); err != nil {
			unix.Unmount(v.Mountpoint, unix.MNT_DETACH)
			return fmt.Errorf("volume %s: %w", name, err)
		}
	}
	return nil
}

// Unmount unmounts a volume's mount (no-op when it has none). The container
// backend calls it once no running container uses the volume; a tmpfs
// volume's content goes with the mount, as with Podman.
func (s *Store) Unmount(ctx context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return unmountData(filepath.Join(s.root, name, "_data"))
}

// unmountData unmounts whatever is mounted on dir, every layer of it.
func unmountData(dir string) error {
	for i := 0; i < 8 && mounted(dir); i++ {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount %s: %w", dir, err)
		}
	}
	if mounted(dir) {
		return fmt.Errorf("%s is still mounted", dir)
	}
	return nil
}

// mounted reports whether dir is a mount point (per /proc/self/mountinfo).
func mounted(dir string) bool {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && unescapeMountPath(fields[4]) == dir {
			return true
		}
	}
	return false
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(p string) string {
	if !strings.Contains(p, `\`) {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' && i+3 < len(p) {
			if n, err := strconv.ParseUint(p[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(p[i])
	}
	return b.String()
}
