package build

import (
	"errors"

	"github.com/berth-project/berth/engine/internal/backend/execution/oci"
	"github.com/berth-project/berth/engine/internal/core"
)

// checkDevices refuses a build whose devices RUN steps could not get,
// before the context is read: a host device that is not one, a CDI
// device no spec defines.
func (b *Builder) checkDevices(devices []string) error {
	var cdiNames []string
	for _, d := range devices {
		if core.IsCDIDevice(d) {
			cdiNames = append(cdiNames, d)
			continue
		}
		if _, err := oci.ResolveDevice(d); err != nil {
			return err
		}
	}
	if len(cdiNames) == 0 {
		return nil
	}
	if b.o.CDI == nil {
		return core.InvalidArgument("devices", errors.New("CDI devices are not configured on this engine"))
	}
	_, err := b.o.CDI.Resolve(cdiNames)
	return err
}
