package core

import (
	"context"
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
	// Generation identifies the specs as they are now (re-read where they
	// changed): it changes whenever they do, and differs between engine
	// runs, so that edits applied under an earlier generation are known
	// to be stale.
	Generation() uint64
}
