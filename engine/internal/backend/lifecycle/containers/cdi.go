package containers

import (
	"errors"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/core"
)

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
