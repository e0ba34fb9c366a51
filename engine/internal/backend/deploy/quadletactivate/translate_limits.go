package quadletactivate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	units "github.com/docker/go-units"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/berth-project/berth/engine/internal/backend/deploy/quadlets"
	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/shared/rlimit"
)

// containerLimits translates a .container's resource, signal, log, group,
// device, masking and mount keys, with Podman's quadlet meanings:
// Memory=, PidsLimit=, ShmSize=, Ulimit=NAME=SOFT[:HARD], StopSignal=,
// LogDriver=, LogOpt=tag=|max-size=, GroupAdd=, AddDevice=[-]SRC[:DST][:PERMS]
// (a leading - skips a device the host lacks), Mask=, Unmask=, and
// Mount=type=bind|volume|tmpfs|image,... (podman's --mount).
func containerLimits(u *unit, ref refFunc, spec *core.ContainerSpec) error {
	if e, ok := lastEntry(u, "Memory"); ok {
		n, err := units.RAMInBytes(e.Value)
		if err != nil || n <= 0 {
			return u.errAt(e, fmt.Errorf("%q is not a size", e.Value))
		}
		resources(spec).Memory = &specs.LinuxMemory{Limit: &n}
	}
	if e, ok := lastEntry(u, "PidsLimit"); ok {
		n, err := strconv.ParseInt(e.Value, 10, 64)
		if err != nil {
			return u.errAt(e, fmt.Errorf("%q is not a number", e.Value))
		}
		resources(spec).Pids = &specs.LinuxPids{Limit: &n}
	}
	if e, ok := lastEntry(u, "ShmSize"); ok {
		n, err := units.RAMInBytes(e.Value)
		if err != nil || n <= 0 {
			return u.errAt(e, fmt.Errorf("%q is not a size", e.Value))
		}
		spec.ShmSize = &n
	}
	for _, e := range u.all("Ulimit") {
		ul, err := units.ParseUlimit(e.Value)
		if err != nil {
			return u.errAt(e, err)
		}
		spec.Rlimits = append(spec.Rlimits, rlimit.Rlimit{Type: "RLIMIT_" + strings.ToUpper(ul.Name), Soft: limitValue(ul.Soft), Hard: limitValue(ul.Hard)})
	}
	if e, ok := lastEntry(u, "StopSignal"); ok {
		sig, err := parseSignal(e.Value)
		if err != nil {
			return u.errAt(e, err)
		}
		spec.StopSignal = &sig
	}
	if err := containerLog(u, spec); err != nil {
		return err
	}
	groups, err := u.words("GroupAdd")
	if err != nil {
		return err
	}
	spec.Groups = append(spec.Groups, groups...)
	for _, e := range u.all("AddDevice") {
		dev, optional := strings.CutPrefix(e.Value, "-")
		src, _, _, err := core.ParseDevice(dev)
		if err != nil {
			return u.errAt(e, err)
		}
		if _, statErr := os.Stat(src); optional && !u.dry && statErr != nil {
			continue
		}
		spec.Devices = append(spec.Devices, specs.LinuxDevice{Path: dev})
	}
	for _, key := range []string{"Mask", "Unmask"} {
		for _, e := range u.all(key) {
			paths := strings.Split(e.Value, ":")
			for _, p := range paths {
				if p != "ALL" && !filepath.IsAbs(p) {
					return u.errAt(e, fmt.Errorf("%q is not an absolute path", p))
				}
			}
			if key == "Mask" {
				spec.Mask = append(spec.Mask, paths...)
			} else {
				spec.Unmask = append(spec.Unmask, paths...)
			}
		}
	}
	for _, e := range u.all("Mount") {
		if err := containerMount(u, e, ref, spec); err != nil {
			return err
		}
	}
	if e, ok := lastEntry(u, "UserNS"); ok {
		if err := containerUserNS(e.Value, spec); err != nil {
			return u.errAt(e, err)
		}
	}
	return nil
}

// containerUserNS reads UserNS=host or auto[:size=N] (podman's --userns).
func containerUserNS(v string, spec *core.ContainerSpec) error {
	mode, opts, _ := strings.Cut(v, ":")
	switch mode {
	case core.UserNSHost:
		if opts != "" {
			return fmt.Errorf("host takes no options")
		}
		spec.UserNS = core.Namespace{NSMode: core.UserNSHost}
	case core.UserNSAuto:
		m := &core.IDMappingOptions{AutoUserNs: true}
		for _, o := range strings.Split(opts, ",") {
			k, val, _ := strings.Cut(o, "=")
			switch k {
			case "":
			case "size":
				n, err := strconv.ParseUint(val, 10, 32)
				if err != nil || n == 0 {
					return fmt.Errorf("size %q is not a positive number", val)
				}
				m.AutoUserNsOpts.Size = uint32(n)
			default:
				return fmt.Errorf("auto option %q is not supported by activation (size)", k)
			}
		}
		spec.UserNS = core.Namespace{NSMode: core.UserNSAuto}
		spec.IDMappings = m
	default:
		return fmt.Errorf("%q is not supported by activation (host, auto[:size=N])", v)
	}
	return nil
}

func lastEntry(u *unit, key string) (e quadlets.Entry, ok bool) {
	es := u.all(key)
	if len(es) == 0 {
		return e, false
	}
	return es[len(es)-1], true
}

func resources(spec *core.ContainerSpec) *specs.LinuxResources {
	if spec.Resources == nil {
		spec.Resources = &specs.LinuxResources{}
	}
	return spec.Resources
}

// limitValue reads -1 as unlimited.
func limitValue(v int64) uint64 {
	if v < 0 {
		return ^uint64(0)
	}
	return uint64(v)
}

// parseSignal reads a signal by number, name or SIG name.
func parseSignal(s string) (int, error) {
	if n, err := strconv.Atoi(s); err == nil && n > 0 && n <= 64 {
		return n, nil
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return int(sig), nil
	}
	return 0, fmt.Errorf("%q is not a signal", s)
}

// containerLog reads LogDriver= and LogOpt= (tag=, max-size=).
func containerLog(u *unit, spec *core.ContainerSpec) error {
	driver, hasDriver := u.last("LogDriver")
	opts := u.all("LogOpt")
	if !hasDriver && len(opts) == 0 {
		return nil
	}
	lc := &core.LogConfig{Driver: driver}
	for _, e := range opts {
		k, v, ok := strings.Cut(e.Value, "=")
		switch {
		case !ok:
			return u.errAt(e, fmt.Errorf("%q is not KEY=VALUE", e.Value))
		case k == "tag":
			lc.Tag = v
		case k == "max-size":
			n, err := units.RAMInBytes(v)
			if err != nil || n <= 0 {
				return u.errAt(e, fmt.Errorf("max-size %q is not a size", v))
			}
			lc.Size = n
		default:
			return u.errAt(e, fmt.Errorf("log option %q is not supported by activation (tag, max-size)", k))
		}
	}
	spec.LogConfiguration = lc
	return nil
}

// containerMount reads one Mount= in podman's --mount form.
func containerMount(u *unit, e quadlets.Entry, ref refFunc, spec *core.ContainerSpec) error {
	fields := map[string]string{}
	var flags []string
	for _, f := range strings.Split(e.Value, ",") {
		k, v, ok := strings.Cut(f, "=")
		k = strings.ToLower(strings.TrimSpace(k))
		if !ok {
			flags = append(flags, k)
			continue
		}
		switch k {
		case "src":
			k = "source"
		case "dst", "target":
			k = "destination"
		}
		fields[k] = v
	}
	typ, src, dest := fields["type"], fields["source"], fields["destination"]
	if !filepath.IsAbs(dest) {
		return u.errAt(e, fmt.Errorf("destination %q is not an absolute path", dest))
	}
	ro := fields["ro"] == "true" || fields["readonly"] == "true"
	for _, f := range flags {
		switch f {
		case "ro", "readonly":
			ro = true
		case "rw", "z", "Z", "":
		default:
			return u.errAt(e, fmt.Errorf("mount option %q is not supported by activation", f))
		}
	}
	for k := range fields {
		switch k {
		case "type", "source", "destination", "ro", "readonly", "rw", "relabel", "tmpfs-size", "tmpfs-mode", "subpath", "bind-propagation":
		default:
			return u.errAt(e, fmt.Errorf("mount option %q is not supported by activation", k))
		}
	}
	var opts []string
	if ro {
		opts = append(opts, "ro")
	}
	if _, ok := fields["subpath"]; ok && typ != "volume" && typ != "image" {
		return u.errAt(e, fmt.Errorf("subpath is for volume and image mounts, not %s", typ))
	}
	switch typ {
	case "bind":
		if src == "" {
			return u.errAt(e, errors.New("a bind mount needs a source"))
		}
		if p := fields["bind-propagation"]; p != "" {
			opts = append(opts, p)
		}
		spec.Mounts = append(spec.Mounts, specs.Mount{Type: "bind", Source: u.hostPath(src), Destination: dest, Options: append([]string{"rbind"}, opts...)})
	case "volume":
		if src == "" {
			if fields["subpath"] != "" {
				return u.errAt(e, errors.New("a subpath needs a named volume: an anonymous one is new and empty"))
			}
			spec.Volumes = append(spec.Volumes, core.NamedVolume{Dest: dest, Options: opts, IsAnonymous: true})
			break
		}
		name, _, err := ref(e, src, ".volume")
		if err != nil {
			return err
		}
		spec.Volumes = append(spec.Volumes, core.NamedVolume{Name: name, Dest: dest, Options: opts, SubPath: fields["subpath"]})
	case "tmpfs":
		if s := fields["tmpfs-size"]; s != "" {
			opts = append(opts, "size="+s)
		}
		if m := fields["tmpfs-mode"]; m != "" {
			opts = append(opts, "mode="+m)
		}
		spec.Mounts = append(spec.Mounts, specs.Mount{Type: "tmpfs", Source: "tmpfs", Destination: dest, Options: opts})
	case "image":
		if src == "" {
			return u.errAt(e, errors.New("an image mount needs a source"))
		}
		name, _, err := ref(e, src, ".image", ".build")
		if err != nil {
			return err
		}
		spec.ImageVolumes = append(spec.ImageVolumes, core.ImageVolume{Source: name, Destination: dest,
			ReadWrite: fields["rw"] == "true", SubPath: fields["subpath"]})
	default:
		return u.errAt(e, fmt.Errorf("mount type %q is not supported by activation (bind, volume, tmpfs, image)", typ))
	}
	return nil
}
