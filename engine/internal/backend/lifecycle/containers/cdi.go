package containers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/core"
)

// resolveGPUs turns the request's GPUs into CDI devices of the first GPU
// vendor the engine's specs offer, as Podman does for --gpus.
func (m *Manager) resolveGPUs(s *core.ContainerSpec) error {
	if len(s.GPUs) == 0 {
		return nil
	}
	if m.cdi == nil {
		return core.InvalidArgument("gpus", errors.New("GPUs are CDI devices, and CDI devices are not configured on this engine"))
	}
	vendors := m.cdi.Vendors()
	vendor := ""
	for _, v := range core.GPUVendors {
		if slices.Contains(vendors, v) {
			vendor = v
			break
		}
	}
	if vendor == "" {
		return core.InvalidArgument("gpus", fmt.Errorf("no CDI spec of a GPU vendor (%s) is loaded (spec directories %s)",
			strings.Join(core.GPUVendors, ", "), strings.Join(m.cdi.Info(context.Background()).SpecDirs, ", ")))
	}
	for _, id := range s.GPUs {
		if id == "" || strings.ContainsAny(id, "/=, ") {
			return core.InvalidArgument("gpus", fmt.Errorf("%q is not a GPU ID (all, 0, 1 ... or a name)", id))
		}
		s.Devices = append(s.Devices, specs.LinuxDevice{Path: vendor + "/gpu=" + id})
	}
	s.GPUs = nil
	return nil
}

// checkCDI refuses a create whose CDI devices the registry does not know
// (or that a malformed spec hides), before anything is created.
func (m *Manager) checkCDI(s *core.ContainerSpec) error {
	names := core.CDIDevices(s.Devices)
	if len(names) == 0 {
		return nil
	}
	if m.cdi == nil {
		return core.InvalidArgument("devices", errors.New("CDI devices are not configured on this engine"))
	}
	_, err := m.cdi.Resolve(names)
	return err
}

// injectCDI applies the edits of the container's CDI devices to its OCI
// spec, after everything else is in it: a device node's owner defaults to
// the process's user, and the edits win over what the request set. It
// returns the registry's generation the edits are at least as new as (0
// without CDI devices).
func (m *Manager) injectCDI(spec *specs.Spec, s *core.ContainerSpec) (uint64, error) {
	names := core.CDIDevices(s.Devices)
	if len(names) == 0 {
		return 0, nil
	}
	if m.cdi == nil {
		return 0, core.InvalidArgument("devices", errors.New("CDI devices are not configured on this engine"))
	}
	gen := m.cdi.Generation()
	return gen, m.cdi.Inject(spec, names)
}

// cdiStale reports whether a container's config.json holds CDI edits older
// than the specs on disk: then init writes it again, so that a start gets
// the devices as their specs are now (as Podman, which applies them at
// every start), while a start right after create pays nothing more.
func (m *Manager) cdiStale(rec *record) bool {
	if len(core.CDIDevices(rec.Spec.Devices)) == 0 {
		return false
	}
	return m.cdi == nil || m.cdi.Generation() != rec.CDIGeneration
}
