package core

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// IsCDIDevice reports whether a device request names a device of the
// Container Device Interface ("vendor.com/class=name") rather than a host
// path: it does not start with a slash and holds an equals sign. Whether
// the name is well formed and known is the CDI registry's to say.
func IsCDIDevice(request string) bool {
	return !strings.HasPrefix(request, "/") && strings.Contains(request, "=")
}

// CDIDevices are the CDI names among a container's device requests.
func CDIDevices(devices []specs.LinuxDevice) []string {
	var out []string
	for _, d := range devices {
		if IsCDIDevice(d.Path) {
			out = append(out, d.Path)
		}
	}
	return out
}

// CDIDevice is one device that a CDI spec on the host offers.
type CDIDevice struct {
	// Name is the qualified name a client asks for ("vendor.com/class=name").
	Name string `json:"name"`
	// Spec is the spec file that defines it.
	Spec string `json:"spec"`
}

// CDISpecError is a spec file the registry could not load; its devices
// are not offered, every other spec's are.
type CDISpecError struct {
	Spec  string `json:"spec"`
	Error string `json:"error"`
}

// CDIInfo is what the CDI registry offers, as info reports it.
type CDIInfo struct {
	SpecDirs []string       `json:"specDirs"`
	Devices  []CDIDevice    `json:"devices"`
	Errors   []CDISpecError `json:"errors,omitempty"`
}

// CDIRegistry hands devices to containers through CDI specs. Every call
// reads the spec directories again where they changed, so a spec written,
// changed or removed on disk counts from the next request on.
type CDIRegistry interface {
	// Resolve checks device names and returns the qualified names they
	// stand for ("vendor/class=all" where no spec defines "all": every
	// device of that kind). A malformed or unknown name is an
	// ErrInvalidArgument naming it (and, where specs failed to load,
	// them).
	Resolve(names []string) ([]string, error)
	// Inject applies every edit the named devices' specs make (device
	// nodes and their cgroup rules, mounts, environment, hooks, groups)
	// to an OCI spec.
	Inject(spec *specs.Spec, names []string) error
	// Info lists the spec directories, the devices and the specs that
	// failed to load.
	Info(ctx context.Context) CDIInfo
	// Vendors lists the vendors of the loaded specs ("nvidia.com" ...).
	Vendors() []string
	// Generation identifies the specs as they are now (re-read where they
	// changed): it changes whenever they do, and differs between engine
	// runs, so that edits applied under an earlier generation are known
	// to be stale.
	Generation() uint64
}

// ValidateDeviceCgroupRule checks one device cgroup rule: type a (all), b
// or c, each number absent (any) or not negative, access a non-empty
// combination of r, w and m.
func ValidateDeviceCgroupRule(r specs.LinuxDeviceCgroup) error {
	switch r.Type {
	case "a", "b", "c":
	default:
		return fmt.Errorf("type %q is not a, b or c", r.Type)
	}
	if r.Major != nil && *r.Major < 0 {
		return fmt.Errorf("major number %d is negative", *r.Major)
	}
	if r.Minor != nil && *r.Minor < 0 {
		return fmt.Errorf("minor number %d is negative", *r.Minor)
	}
	if !validDeviceMode(r.Access) {
		return fmt.Errorf("access %q is not a combination of r, w and m", r.Access)
	}
	return nil
}

// FormatDeviceCgroupRule writes a rule as podman's --device-cgroup-rule
// takes it ("c 1:3 rwm", "b *:* r"); a deny rule is marked.
func FormatDeviceCgroupRule(r specs.LinuxDeviceCgroup) string {
	num := func(n *int64) string {
		if n == nil {
			return "*"
		}
		return strconv.FormatInt(*n, 10)
	}
	out := fmt.Sprintf("%s %s:%s %s", r.Type, num(r.Major), num(r.Minor), r.Access)
	if !r.Allow {
		out += " (deny)"
	}
	return out
}

// KeepGroups is the special supplementary group of podman --group-add
// keep-groups: the container's process keeps the groups of the process
// that starts the runtime, rather than getting the user's.
const KeepGroups = "keep-groups"

// validateGroups refuses keep-groups beside other groups, as Podman does;
// whether the runtime can honour it is the container backend's to say.
func validateGroups(groups []string) error {
	for _, g := range groups {
		if g == KeepGroups && len(groups) > 1 {
			return InvalidArgument("groups", errors.New("keep-groups cannot be combined with other groups"))
		}
		if g == "" {
			return InvalidArgument("groups", errors.New("a group is empty"))
		}
	}
	return nil
}

// ParseDeviceCgroupRule reads a rule as the CLIs take it: "TYPE MAJOR:MINOR
// ACCESS", a number being * for any ("c 1:3 rwm", "b *:* r", "a *:* rwm").
func ParseDeviceCgroupRule(rule string) (specs.LinuxDeviceCgroup, error) {
	out := specs.LinuxDeviceCgroup{Allow: true}
	f := strings.Fields(rule)
	if len(f) != 3 {
		return out, fmt.Errorf("%q is not TYPE MAJOR:MINOR ACCESS", rule)
	}
	majorS, minorS, ok := strings.Cut(f[1], ":")
	if !ok {
		return out, fmt.Errorf("%q: %q is not MAJOR:MINOR", rule, f[1])
	}
	num := func(v string) (*int64, error) {
		if v == "*" {
			return nil, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q: %q is not a number or *", rule, v)
		}
		return &n, nil
	}
	var err error
	out.Type, out.Access = f[0], f[2]
	if out.Major, err = num(majorS); err != nil {
		return out, err
	}
	if out.Minor, err = num(minorS); err != nil {
		return out, err
	}
	if err := ValidateDeviceCgroupRule(out); err != nil {
		return out, fmt.Errorf("%q: %w", rule, err)
	}
	return out, nil
}

// GPUVendors are the vendors whose CDI specs offer GPUs as VENDOR/gpu=ID,
// in the order Podman looks for them.
var GPUVendors = []string{"nvidia.com", "amd.com"}
