package containers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/execution/cgroups"
	"github.com/berth-project/berth/engine/internal/backend/execution/oci"
	"github.com/berth-project/berth/engine/internal/backend/execution/runtime"
	"github.com/berth-project/berth/engine/internal/core"
)

// The --cgroups modes (Podman's).
const (
	cgroupsEnabled  = "enabled"
	cgroupsNoConmon = "no-conmon"
	cgroupsSplit    = "split"
)

// resolveCgroups checks a new container's cgroups mode and cgroup parent
// against the engine's cgroup manager and the host, before anything is
// created, and fills in the default mode. Under the systemd manager a
// parent is a slice name (runc's "SLICE:prefix:name" cgroupsPath takes
// nothing else); under cgroupfs a clean absolute path.
func (m *Manager) resolveCgroups(spec *core.ContainerSpec, pod *core.PodMembership) error {
	if err := core.CheckCgroupsMode(spec.CgroupsMode); err != nil {
		return core.InvalidArgument("cgroups_mode", err)
	}
	if spec.CgroupsMode == "" {
		spec.CgroupsMode = cgroupsEnabled
	}
	if spec.CgroupsMode == core.CgroupsDisabled {
		return m.checkNoCgroup(spec, pod)
	}
	if spec.CgroupsMode == cgroupsSplit {
		if spec.CgroupParent != "" {
			return core.InvalidArgument("cgroups_mode", errors.New(`"split" places the container under the engine's own cgroup and takes no cgroup_parent (as Podman)`))
		}
		if pod != nil && pod.CgroupParent != "" {
			return core.InvalidArgument("cgroups_mode", fmt.Errorf(`"split" cannot place a member of pod %s, whose cgroup is its parent`, pod.PodName))
		}
		if _, err := cgroups.SplitParent(); err != nil {
			return core.InvalidArgument("cgroups_mode", fmt.Errorf(`"split" cannot be honoured on this host: %w`, err))
		}
		return nil
	}
	if spec.CgroupParent == "" {
		return nil
	}
	if pod != nil && pod.CgroupParent != "" {
		return core.InvalidArgument("cgroup_parent", fmt.Errorf("the container joins pod %s, whose cgroup is its parent", pod.PodName))
	}
	if m.cgroupManager == cgroups.ManagerSystemd {
		if err := cgroups.CheckSlice(spec.CgroupParent); err != nil {
			return core.InvalidArgument("cgroup_parent", fmt.Errorf("with the systemd cgroup manager the parent must be a slice name (x.slice): %w", err))
		}
		return nil
	}
	p := spec.CgroupParent
	if !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
		return core.InvalidArgument("cgroup_parent", fmt.Errorf("%q is not a clean absolute cgroup path (the cgroupfs manager)", p))
	}
	return nil
}

// checkNoCgroup checks a container of cgroups mode disabled (Podman's
// NoCgroups) before anything is created: it runs in the cgroup of its
// conmon, which stays in the engine's, so nothing that needs a cgroup of
// its own can be honoured. Only crun runs a container without one (its
// --cgroup-manager disabled); runc always creates one. As Podman, the
// container needs a private PID namespace: without a cgroup to kill every
// process in, the kill of its init is what ends them all. The cgroup
// namespace is the host's: there is no cgroup of its own to be the root
// of a private one.
func (m *Manager) checkNoCgroup(spec *core.ContainerSpec, pod *core.PodMembership) error {
	if m.rt.Name() != "crun" {
		return core.InvalidArgument("cgroups_mode", fmt.Errorf(`"disabled" needs crun, which runs a container without a cgroup of its own (--cgroup-manager disabled); this engine runs %s, which always creates one (requested OCI runtime %s is not compatible with NoCgroups)`, m.rt.Name(), m.rt.Name()))
	}
	conflict := func(field, why string) error {
		return core.InvalidArgument(field, fmt.Errorf(`conflicts with cgroups_mode "disabled" (the container gets no cgroup of its own): %s`, why))
	}
	if spec.CgroupParent != "" {
		return conflict("cgroup_parent", "there is no cgroup to place under a parent")
	}
	if pod != nil && pod.CgroupParent != "" {
		return conflict("pod", fmt.Sprintf("pod %s places its members in its cgroup", pod.PodName))
	}
	if pod.Shares(core.PodSharePID) {
		return conflict("pod", fmt.Sprintf("pod %s shares its PID namespace; a container without a cgroup needs a private one", pod.PodName))
	}
	switch spec.PidNS.NSMode {
	case "", "private":
	default:
		return conflict("pidns", fmt.Sprintf("mode %s: a container without a cgroup needs a private PID namespace, so that the kill of its init ends every process in it", spec.PidNS.NSMode))
	}
	switch spec.CgroupNS.NSMode {
	case "":
		spec.CgroupNS.NSMode = core.CgroupNSHost
	case core.CgroupNSHost:
	default:
		return conflict("cgroupns", fmt.Sprintf("mode %s: there is no cgroup of the container's own to be the root of a cgroup namespace", spec.CgroupNS.NSMode))
	}
	if what := cgroupLimits(spec); what != "" {
		return conflict("resource_limits", what+" needs a cgroup to apply it")
	}
	if len(spec.DeviceCgroupRules) > 0 {
		return conflict("device_cgroup_rule", "device rules are a cgroup's")
	}
	return nil
}

// cgroupLimits names the first cgroup limit spec asks for ("" for none);
// the empty objects podman sends ask for nothing.
func cgroupLimits(spec *core.ContainerSpec) string {
	if spec.CPUPeriod != 0 || spec.CPUQuota != 0 {
		return "a CPU limit"
	}
	r := spec.Resources
	if r == nil {
		return ""
	}
	//lint:ignore SA1019 a kernel-memory limit a client asks for is refused like any other, so it is looked at.
	if mem := r.Memory; mem != nil && (nonZero(mem.Limit) || nonZero(mem.Reservation) || nonZero(mem.Swap) || nonZero(mem.Kernel) || nonZero(mem.KernelTCP) || mem.Swappiness != nil && *mem.Swappiness != 0 || mem.DisableOOMKiller != nil && *mem.DisableOOMKiller) {
		return "a memory limit"
	}
	if cpu := r.CPU; cpu != nil && (cpu.Shares != nil && *cpu.Shares != 0 || nonZero(cpu.Quota) || cpu.Period != nil && *cpu.Period != 0 || cpu.Cpus != "" || cpu.Mems != "" || nonZero(cpu.RealtimeRuntime) || cpu.RealtimePeriod != nil && *cpu.RealtimePeriod != 0 || cpu.Idle != nil && *cpu.Idle != 0) {
		return "a CPU limit"
	}
	if p := r.Pids; p != nil && p.Limit != nil && *p.Limit != 0 {
		return "a pids limit"
	}
	if b := r.BlockIO; b != nil && !oci.BlockIOEmpty(b) {
		return "a block I/O limit"
	}
	if len(r.HugepageLimits) > 0 || len(r.Unified) > 0 || r.Network != nil || len(r.Rdma) > 0 {
		return "a cgroup limit"
	}
	return ""
}

func nonZero(v *int64) bool { return v != nil && *v != 0 }

// placeCgroup records where the container's cgroup lives: below its pod's
// cgroup, its own parent or the engine's; a container of cgroups mode
// disabled has none.
func (m *Manager) placeCgroup(rec *record, pm *core.PodMembership) error {
	if rec.NoCgroup() {
		rec.CgroupPath, rec.CgroupSystemd, rec.CgroupUnit, rec.CgroupsPathOCI = "", false, "", ""
		return nil
	}
	parent := m.cgroupParent
	if rec.Spec.CgroupParent != "" {
		parent = rec.Spec.CgroupParent
	}
	if pm != nil && pm.CgroupParent != "" {
		parent = pm.CgroupParent
	}
	p, err := cgroups.ContainerPlacement(m.cgroupManager, parent, rec.ID)
	if rec.Spec.CgroupsMode == cgroupsSplit {
		// Checked by resolveCgroups; the engine's cgroup is split once.
		split, serr := cgroups.SplitParent()
		if serr != nil {
			return core.InvalidArgument("cgroups_mode", serr)
		}
		p, err = cgroups.SplitPlacement(split, rec.ID), nil
	}
	if err != nil {
		return core.InvalidArgument("cgroup_parent", err)
	}
	rec.CgroupPath, rec.CgroupSystemd, rec.CgroupUnit = p.Path, p.Systemd, p.Unit
	rec.CgroupsPathOCI = ""
	if p.OCI != p.Path {
		rec.CgroupsPathOCI = p.OCI
	}
	return nil
}

// ociCgroupsPath is the cgroupsPath of the container's OCI spec.
func ociCgroupsPath(rec *record) string {
	if rec.CgroupsPathOCI != "" {
		return rec.CgroupsPathOCI
	}
	return rec.CgroupPath
}

// runtimeCreateOptions is what a create and a restore give the runtime
// alike: the container's bundle, logs, terminal and cgroups, conmon's scope.
func runtimeCreateOptions(rec *record) runtime.CreateOptions {
	conmonUnit, conmonSlice := conmonScope(rec)
	return runtime.CreateOptions{
		ID: rec.ID, Name: rec.Name, Bundle: rec.Bundle, LogPath: rec.LogPath,
		LogDriver: rec.Spec.LogDriver(), LogTag: rec.Spec.LogTag(), LogSizeMax: rec.Spec.LogSizeMax(),
		Terminal: rec.Spec.Terminal, Stdin: rec.Spec.Stdin, NoCgroup: rec.NoCgroup(),
		SystemdCgroup: rec.CgroupSystemd, ConmonScope: conmonUnit, ConmonSlice: conmonSlice, ConmonCgroup: splitConmonCgroup(rec),
	}
}

// conmonScope is the scope conmon is moved into: under systemd in enabled
// mode, as Podman does; "" leaves it in the engine's cgroup (no-conmon, and
// the cgroupfs manager, where the engine keeps no cgroup of conmon's).
func conmonScope(rec *record) (unit, slice string) {
	if !rec.CgroupSystemd || rec.Spec.CgroupsMode == cgroupsNoConmon {
		return "", ""
	}
	slice, _, _ = strings.Cut(rec.CgroupsPathOCI, ":")
	return cgroups.ConmonScope(rec.ID), slice
}

// splitConmonCgroup is the cgroup conmon of a split container is moved
// into ("" for the other modes).
func splitConmonCgroup(rec *record) string {
	if rec.Spec.CgroupsMode != cgroupsSplit {
		return ""
	}
	split, err := cgroups.SplitParent()
	if err != nil {
		return ""
	}
	return cgroups.SplitConmonCgroup(split, rec.ID)
}

// releaseSystemdUnits stops what systemd still holds of an ended
// container: its scope where runc's delete left it (a delete a kill -9
// cut short, a create that never finished), and conmon's scope once
// conmon is gone. A scope that empties goes by itself; this is for the
// ones that did not. Under cgroupfs there is nothing to do.
func (m *Manager) releaseSystemdUnits(ctx context.Context, rec *record) {
	if rec.ConmonCgroup != "" && !runtime.ProcessAlive(rec.ConmonPID) {
		// A split container's conmon cgroup, once conmon is gone.
		if err := cgroups.RemoveEmpty(rec.ConmonCgroup); err != nil {
			m.logger.Warn("removing conmon's cgroup", "container", rec.ID, "cgroup", rec.ConmonCgroup, "err", err)
		}
	}
	if !rec.CgroupSystemd {
		return
	}
	units := map[string]string{rec.CgroupUnit: rec.CgroupPath}
	if u, _ := conmonScope(rec); u != "" {
		units[u] = path.Join(path.Dir(rec.CgroupPath), u)
	}
	// The scopes are stopped at once: each waits for its systemd job.
	var wg sync.WaitGroup
	for unit, dir := range units {
		if unit == "" {
			continue
		}
		if _, err := os.Stat(cgroups.Host().Dir("", dir)); err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := cgroups.StopUnit(ctx, unit); err != nil {
				m.logger.Warn("stopping a container's systemd scope", "container", rec.ID, "unit", unit, "err", err)
			}
		}()
	}
	wg.Wait()
}

// inspectCgroupManager is the manager that placed the container's cgroup;
// for a container without one, the engine's (as Podman shows its own).
func (m *Manager) inspectCgroupManager(rec *record) string {
	if rec.NoCgroup() {
		return m.cgroupManager
	}
	if rec.CgroupSystemd {
		return cgroups.ManagerSystemd
	}
	return cgroups.ManagerCgroupfs
}

// inspectCgroups is HostConfig.Cgroups as Podman shows it: "default"
// unless the container asked for another mode.
func inspectCgroups(mode string) string {
	if mode == "" || mode == cgroupsEnabled {
		return "default"
	}
	return mode
}

// inspectCgroupParent is the parent the container's cgroup was placed
// under: a slice under systemd, a path under cgroupfs ("" without one).
func inspectCgroupParent(rec *record) string {
	if rec.NoCgroup() {
		return ""
	}
	if rec.CgroupSystemd {
		slice, _, _ := strings.Cut(rec.CgroupsPathOCI, ":")
		return slice
	}
	return path.Dir(rec.CgroupPath)
}

// watchOOM watches the OOM kills of a systemd-placed container: systemd
// removes its scope as soon as it is empty, often before the exit is
// handled and the cgroup's count read (conmon's oom file races the same
// way). Under cgroupfs the cgroup stays until the runtime's delete.
func (m *Manager) watchOOM(e *entry) {
	rec := m.snapshot(e)
	if !rec.CgroupSystemd {
		return
	}
	e.oomSeen.Store(false)
	done, err := cgroups.WatchOOM(rec.CgroupPath, func() { e.oomSeen.Store(true) })
	if err != nil {
		m.logger.Debug("watching OOM kills", "container", rec.ID, "err", err)
		return
	}
	e.oomWatch.Store(&done)
}

// oomSeenAfterKill tells whether the OOM watch saw a kill of a container
// that died of SIGKILL: the watch may not have read the count yet when the
// exit is handled, so it is given until it ends (the count read, or the
// scope gone, which follows the exit at once), a second at most.
func (e *entry) oomSeenAfterKill(code int32) bool {
	if e.oomSeen.Load() || code != 128+9 {
		return e.oomSeen.Load()
	}
	if p := e.oomWatch.Load(); p != nil && *p != nil {
		select {
		case <-*p:
		case <-time.After(time.Second):
		}
	}
	return e.oomSeen.Load()
}

// oomKillLogged is the last resort for a systemd-placed container that
// died of SIGKILL while neither its cgroup's count (the scope is gone) nor
// the watch nor conmon saw an OOM kill: the kernel log's OOM summary
// names the victim's cgroup (see cgroups.OOMKillLogged).
func (m *Manager) oomKillLogged(rec record, code int32) bool {
	if !rec.CgroupSystemd || code != 128+9 || rec.CgroupPath == "" || rec.PauseProcess {
		return false
	}
	killed, ok := cgroups.OOMKillLogged(rec.CgroupPath, rec.StartedAt)
	if !ok {
		m.logger.Debug("the kernel log cannot be read for OOM kills", "container", rec.ID)
	}
	if killed {
		m.logger.Info("OOM kill found in the kernel log", "container", rec.ID, "cgroup", rec.CgroupPath)
	}
	return killed
}
