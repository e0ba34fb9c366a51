package kube

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"

	"github.com/berth-project/berth/engine/internal/core"
)

// isCDIKind reports whether a resource name is an extended resource of the
// "vendor.com/class" form, which the engine reads as a CDI device kind (as
// a device plugin exposes "nvidia.com/gpu" on a kubelet).
func isCDIKind(name v1.ResourceName) bool {
	vendor, class, ok := strings.Cut(string(name), "/")
	return ok && vendor != "" && class != "" && !strings.Contains(class, "/")
}

// cdiLimits turns each limit of a CDI kind ("example.com/dev: 2") into that
// many devices of the kind, the first ones by name ("all" aside), as a
// kubelet's device plugin would allocate distinct devices. A request of
// the kind, where given, must equal the limit (Kubernetes' rule for
// extended resources).
func (pl *planner) cdiLimits(ctx context.Context, cs *core.ContainerSpec, r v1.ResourceRequirements) error {
	var kinds []string
	for name := range r.Limits {
		if isCDIKind(name) {
			kinds = append(kinds, string(name))
		}
	}
	for name, q := range r.Requests {
		if !isCDIKind(name) {
			continue
		}
		if l, ok := r.Limits[name]; !ok || l.Cmp(q) != 0 {
			return fmt.Errorf("request %s must equal its limit (a CDI device kind)", name)
		}
	}
	if len(kinds) == 0 {
		return nil
	}
	if pl.p.o.CDI == nil {
		return errors.New("CDI devices are not configured on this engine")
	}
	sort.Strings(kinds)
	offered := pl.p.o.CDI.Info(ctx).Devices
	for _, kind := range kinds {
		q := r.Limits[v1.ResourceName(kind)]
		n, ok := q.AsInt64()
		if !ok || n < 1 {
			return fmt.Errorf("limit %s: %s is not a whole number of devices", kind, q.String())
		}
		var names []string
		for _, d := range offered {
			if dev, ok := strings.CutPrefix(d.Name, kind+"="); ok && dev != "all" {
				names = append(names, d.Name)
			}
		}
		sort.Strings(names)
		if int64(len(names)) < n {
			return fmt.Errorf("limit %s: %d: the CDI specs offer %d devices of that kind", kind, n, len(names))
		}
		for _, name := range names[:n] {
			cs.Devices = append(cs.Devices, specs.LinuxDevice{Path: name})
		}
	}
	return nil
}
