package containers

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/backend/execution/cgroups"
	"github.com/berth-project/berth/engine/internal/core"
)

// resolveCgroupNS checks the requested cgroup namespace and fills in the
// default: a private namespace where the host runs the unified hierarchy
// (the container then sees its own cgroup as /), the host's on v1, as
// Podman does. A pod's infra container keeps the host's: it runs nothing
// but catatonit, and the pause process that stands in for it joins its
// cgroup after it starts. container:ID names an existing container
// (recorded by ID).
func (m *Manager) resolveCgroupNS(spec *core.ContainerSpec) error {
	ns := &spec.CgroupNS
	switch ns.NSMode {
	case "":
		ns.NSMode = core.CgroupNSHost
		if cgroups.Host().Unified() && !spec.PodInfra {
			ns.NSMode = core.CgroupNSPrivate
		}
		if ns.Value != "" {
			return core.InvalidArgument("cgroupns", errors.New("a value needs a mode"))
		}
	case core.CgroupNSHost, core.CgroupNSPrivate:
		if ns.Value != "" {
			return core.InvalidArgument("cgroupns", fmt.Errorf("mode %s takes no value", ns.NSMode))
		}
	case core.CgroupNSPath:
		if !filepath.IsAbs(ns.Value) {
			return core.InvalidArgument("cgroupns", fmt.Errorf("path %q is not absolute", ns.Value))
		}
	case core.CgroupNSContainer:
		if ns.Value == "" {
			return core.InvalidArgument("cgroupns", errors.New("mode container needs the container to join"))
		}
		target, err := m.lookupDonor("cgroupns", ns.Value)
		if err != nil {
			return err
		}
		ns.Value = target.ID
	default:
		return core.InvalidArgument("cgroupns", fmt.Errorf("mode %q is not supported (host, private, container:ID, ns:PATH)", ns.NSMode))
	}
	return nil
}

// joinCgroupNS adds the cgroup namespace of the container a cgroupns
// container:ID request joins; that container must run.
func (m *Manager) joinCgroupNS(rec *record, joins map[specs.LinuxNamespaceType]string) (map[specs.LinuxNamespaceType]string, error) {
	if rec.Spec.CgroupNS.NSMode != core.CgroupNSContainer {
		return joins, nil
	}
	te, err := m.lookup(rec.Spec.CgroupNS.Value)
	if err != nil {
		return nil, fmt.Errorf("container %s joins the cgroup namespace of %s: %w", rec.Name, rec.Spec.CgroupNS.Value, err)
	}
	target := m.snapshot(te)
	if (target.State != core.StateRunning && target.State != core.StatePaused) || target.PID <= 0 {
		return nil, fmt.Errorf("container %s joins the cgroup namespace of %s, which is not running: %w", rec.Name, target.Name, core.ErrContainerStateImproper)
	}
	if joins == nil {
		joins = map[specs.LinuxNamespaceType]string{}
	}
	joins[specs.CgroupNamespace] = filepath.Join("/proc", strconv.Itoa(target.PID), "ns", "cgroup")
	return joins, nil
}
