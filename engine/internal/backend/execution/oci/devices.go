package oci

import (
	"fmt"
	"os"
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/berth-project/berth/engine/internal/core"
)

// Device is a host device resolved for a container: the node runc creates
// at Destination and the cgroup rule that lets the container use it.
type Device struct {
	Node   specs.LinuxDevice
	Rule   specs.LinuxDeviceCgroup
	Source string
}

// ResolveDevice reads a device request ("source[:destination][:permissions]")
// against the host: the source (a symbolic link is followed, as Podman
// does) must be a character or block device. Errors name the devices field.
func ResolveDevice(request string) (*Device, error) {
	src, dst, perms, err := core.ParseDevice(request)
	if err != nil {
		return nil, core.InvalidArgument("devices", err)
	}
	resolved, err := filepath.EvalSymlinks(src)
	if err != nil {
		return nil, core.InvalidArgument("devices", fmt.Errorf("%s: %w", src, err))
	}
	var st unix.Stat_t
	if err := unix.Stat(resolved, &st); err != nil {
		return nil, core.InvalidArgument("devices", fmt.Errorf("%s: %w", src, err))
	}
	var typ string
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR:
		typ = "c"
	case unix.S_IFBLK:
		typ = "b"
	default:
		return nil, core.InvalidArgument("devices", fmt.Errorf("%s is not a character or block device", src))
	}
	major, minor := int64(unix.Major(uint64(st.Rdev))), int64(unix.Minor(uint64(st.Rdev)))
	mode := os.FileMode(st.Mode & 0o777)
	uid, gid := st.Uid, st.Gid
	return &Device{
		Source: resolved,
		Node: specs.LinuxDevice{
			Path: dst, Type: typ, Major: major, Minor: minor,
			FileMode: &mode, UID: &uid, GID: &gid,
		},
		Rule: specs.LinuxDeviceCgroup{Allow: true, Type: typ, Major: &major, Minor: &minor, Access: perms},
	}, nil
}

// addDevices puts the requested host devices into the spec: their nodes,
// and the cgroup rules after the default deny. CDI devices are the CDI
// registry's, applied by the caller.
func addDevices(spec *specs.Spec, s *core.ContainerSpec) error {
	for _, d := range s.Devices {
		if core.IsCDIDevice(d.Path) {
			continue
		}
		dev, err := ResolveDevice(d.Path)
		if err != nil {
			return err
		}
		spec.Linux.Devices = append(spec.Linux.Devices, dev.Node)
		spec.Linux.Resources.Devices = append(spec.Linux.Resources.Devices, dev.Rule)
	}
	// The requested rules come after the defaults, so they may open (or,
	// for a deny, close) what those decided.
	spec.Linux.Resources.Devices = append(spec.Linux.Resources.Devices, s.DeviceCgroupRules...)
	return nil
}

// BlockDevice reads the device numbers of the block device at path (links
// followed), for per-device I/O limits.
func BlockDevice(path string) (major, minor int64, err error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, 0, fmt.Errorf("%s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return 0, 0, fmt.Errorf("%s is not a block device", path)
	}
	return int64(unix.Major(uint64(st.Rdev))), int64(unix.Minor(uint64(st.Rdev))), nil
}
