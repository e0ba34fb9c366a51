package containers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/backend/execution/cgroups"
	"github.com/berth-project/berth/engine/internal/backend/execution/oci"
	"github.com/berth-project/berth/engine/internal/core"
)

// Update changes the resources and restart policy of a container; a live
// container gets the new resources through the OCI runtime at once.
func (m *Manager) Update(ctx context.Context, nameOrID string, opts core.UpdateContainerOptions) error {
	// A client that goes away must not leave a change half done.
	ctx = context.WithoutCancel(ctx)
	e, err := m.lookup(nameOrID)
	if err != nil {
		return err
	}
	if opts.RestartPolicy != nil {
		if err := core.ValidateRestartPolicy(*opts.RestartPolicy, opts.RestartTries); err != nil {
			return err
		}
	}
	e.op.Lock()
	defer e.op.Unlock()
	rec := m.snapshot(e)
	if opts.RestartPolicy != nil && rec.Spec.Remove && *opts.RestartPolicy != "" && *opts.RestartPolicy != core.RestartPolicyNo {
		return core.InvalidArgument("restart_policy", fmt.Errorf("container %s is removed when it exits; it cannot have a restart policy", rec.Name))
	}
	next := rec.Spec
	if opts.Health != nil && !opts.Health.Empty() {
		if err := opts.Health.Apply(&next); err != nil {
			return err
		}
	}
	if err := resolveUpdateThrottles(&opts, &next); err != nil {
		return err
	}
	envChanged, err := updateEnv(&next, opts.Env, opts.UnsetEnv)
	if err != nil {
		return err
	}
	var rlimits []specs.POSIXRlimit
	if opts.Rlimits != nil {
		if rlimits, _, err = oci.Rlimits(opts.Rlimits, m.host); err != nil {
			return err
		}
		next.Rlimits = opts.Rlimits
	}
	live := rec.State == core.StateRunning || rec.State == core.StatePaused || rec.State == core.StateCreated
	if opts.Resources != nil && rec.NoCgroup() {
		return fmt.Errorf("cannot update the resources of container %s, which runs without a cgroup of its own (cgroups_mode disabled): %w", rec.Name, core.ErrNoCgroup)
	}
	if opts.Resources != nil {
		if field := unmergeable(opts.Resources); field != "" {
			return core.InvalidArgument(field, errors.New("cannot be updated: recreate the container with it"))
		}
		merged := mergeResources(rec.Spec.Resources, opts.Resources)
		next.Resources = merged
		probe := next
		if _, err := m.validateResources(&probe); err != nil {
			return err
		}
		if live {
			if err := m.rt.Update(ctx, rec.ID, merged); err != nil {
				return fmt.Errorf("update container %s: %w", rec.Name, err)
			}
			// runc update leaves device throttles alone.
			if rec.CgroupPath != "" {
				if err := cgroups.Host().SetIOThrottle(rec.CgroupPath, opts.Resources.BlockIO); err != nil {
					return fmt.Errorf("update container %s: %w", rec.Name, err)
				}
			}
		}
	}
	if opts.RestartPolicy != nil {
		next.RestartPolicy = *opts.RestartPolicy
		next.RestartTries = opts.RestartTries
	}
	if (envChanged || rlimits != nil) && live {
		// The execs a running container gets from now on run with them,
		// as Podman rewrites the spec on disk.
		if err := updateBundleProcess(rec.Bundle, opts.Env, opts.UnsetEnv, rlimits); err != nil {
			return fmt.Errorf("update container %s: %w", rec.Name, err)
		}
	}
	if err := m.update(ctx, e, func(r *record) { r.Spec = next }); err != nil {
		return err
	}
	if !live && rec.Bundle != "" && (envChanged || rlimits != nil || opts.Resources != nil) {
		// The next init writes config.json anew from the updated request.
		if err := os.Remove(filepath.Join(rec.Bundle, "config.json")); err != nil && !errors.Is(err, os.ErrNotExist) {
			m.logger.Warn("drop the container's OCI spec after an update", "container", rec.ID, "err", err)
		}
	}
	m.emit(ctx, core.EventUpdate, m.snapshot(e), nil)
	return nil
}

// updateEnv applies an update's variables to s.Env; it reports whether it
// changed anything. A variable that is not NAME=value, or a name to unset
// that is no name, is a 400.
func updateEnv(s *core.ContainerSpec, set, unset []string) (bool, error) {
	if len(set) == 0 && len(unset) == 0 {
		return false, nil
	}
	env := maps.Clone(s.Env)
	if env == nil {
		env = map[string]string{}
	}
	for i, kv := range set {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" || strings.ContainsRune(kv, 0) {
			return false, core.InvalidArgument(fmt.Sprintf("Env[%d]", i), fmt.Errorf("%q is not NAME=value", kv))
		}
		env[name] = value
	}
	for i, name := range unset {
		if name == "" || strings.ContainsAny(name, "=\x00") {
			return false, core.InvalidArgument(fmt.Sprintf("UnsetEnv[%d]", i), fmt.Errorf("%q is not a variable name", name))
		}
		delete(env, name)
	}
	s.Env = env
	return true, nil
}

// updateBundleProcess rewrites the process of a live container's OCI spec
// (what its execs start from): the variables set and unset, and the
// rlimits when given. The file is replaced whole, never half written.
func updateBundleProcess(bundle string, set, unset []string, rlimits []specs.POSIXRlimit) error {
	return editBundleSpec(bundle, func(spec *specs.Spec) error {
		if spec.Process == nil {
			return fmt.Errorf("%s: the spec has no process", bundle)
		}
		env := oci.SetEnv(spec.Process.Env, set)
		spec.Process.Env = slices.DeleteFunc(env, func(kv string) bool {
			name, _, _ := strings.Cut(kv, "=")
			return slices.Contains(unset, name)
		})
		if rlimits != nil {
			spec.Process.Rlimits = rlimits
		}
		return nil
	})
}

// SetHealth records a container's health state.
func (m *Manager) SetHealth(ctx context.Context, nameOrID string, health core.HealthCheckResults) error {
	// A client that goes away must not leave a change half done.
	ctx = context.WithoutCancel(ctx)
	e, err := m.lookup(nameOrID)
	if err != nil {
		return err
	}
	return m.update(ctx, e, func(r *record) { r.Health = health })
}

// Exec runs a process in a running container.
func (m *Manager) Exec(ctx context.Context, nameOrID string, req core.ExecRequest) (core.ExecProcess, error) {
	e, err := m.lookup(nameOrID)
	if err != nil {
		return nil, err
	}
	rec := m.snapshot(e)
	if rec.State != core.StateRunning {
		return nil, fmt.Errorf("container %s is %s, not running: %w", rec.Name, rec.State, core.ErrStateConflict)
	}
	if req.Privileged {
		all := slices.Clone(m.host.BoundingCaps)
		req.Process.Capabilities = &specs.LinuxCapabilities{Bounding: all, Effective: all, Permitted: all}
	}
	return m.rt.Exec(ctx, &rec.Container, req)
}

func (m *Manager) validateResources(s *core.ContainerSpec) (*specs.LinuxResources, error) {
	r, _, err := oci.Resources(s, m.host)
	return r, err
}

// mergeResources overlays the set parts of upd on cur.
func mergeResources(cur, upd *specs.LinuxResources) *specs.LinuxResources {
	out := &specs.LinuxResources{}
	if cur != nil {
		c := *cur
		out = &c
	}
	if upd.Memory != nil {
		mem := valueOf(out.Memory)
		overlay(&mem.Limit, upd.Memory.Limit)
		overlay(&mem.Swap, upd.Memory.Swap)
		overlay(&mem.Reservation, upd.Memory.Reservation)
		// runc update leaves these two alone: they apply from the next start.
		overlay(&mem.Swappiness, upd.Memory.Swappiness)
		overlay(&mem.DisableOOMKiller, upd.Memory.DisableOOMKiller)
		out.Memory = &mem
	}
	if upd.CPU != nil {
		cpu := valueOf(out.CPU)
		overlay(&cpu.Shares, upd.CPU.Shares)
		overlay(&cpu.Quota, upd.CPU.Quota)
		overlay(&cpu.Period, upd.CPU.Period)
		overlay(&cpu.RealtimePeriod, upd.CPU.RealtimePeriod)
		overlay(&cpu.RealtimeRuntime, upd.CPU.RealtimeRuntime)
		if upd.CPU.Cpus != "" {
			cpu.Cpus = upd.CPU.Cpus
		}
		if upd.CPU.Mems != "" {
			cpu.Mems = upd.CPU.Mems
		}
		out.CPU = &cpu
	}
	if upd.Pids != nil {
		p := *upd.Pids
		out.Pids = &p
	}
	if upd.BlockIO != nil {
		blk := valueOf(out.BlockIO)
		overlay(&blk.Weight, upd.BlockIO.Weight)
		for _, l := range []struct {
			cur *[]specs.LinuxThrottleDevice
			upd []specs.LinuxThrottleDevice
		}{
			{&blk.ThrottleReadBpsDevice, upd.BlockIO.ThrottleReadBpsDevice},
			{&blk.ThrottleWriteBpsDevice, upd.BlockIO.ThrottleWriteBpsDevice},
			{&blk.ThrottleReadIOPSDevice, upd.BlockIO.ThrottleReadIOPSDevice},
			{&blk.ThrottleWriteIOPSDevice, upd.BlockIO.ThrottleWriteIOPSDevice},
		} {
			if len(l.upd) > 0 {
				*l.cur = l.upd
			}
		}
		out.BlockIO = &blk
	}
	if len(upd.Unified) > 0 {
		unified := maps.Clone(out.Unified)
		if unified == nil {
			unified = map[string]string{}
		}
		maps.Copy(unified, upd.Unified)
		out.Unified = unified
	}
	return out
}

// valueOf is a copy of *p, or T's zero value where p is nil.
func valueOf[T any](p *T) T {
	var v T
	if p != nil {
		v = *p
	}
	return v
}

// overlay sets *dst to upd where the update sets it (non-nil).
func overlay[T any](dst **T, upd *T) {
	if upd != nil {
		*dst = upd
	}
}

// unmergeable names the first resource of an update that mergeResources
// does not carry (nothing of it would change): "" when there is none.
func unmergeable(upd *specs.LinuxResources) string {
	switch {
	case len(upd.Devices) > 0:
		return "devices"
	case len(upd.HugepageLimits) > 0:
		return "hugepageLimits"
	case upd.Network != nil:
		return "network"
	case len(upd.Rdma) > 0:
		return "rdma"
	case upd.Memory != nil && (upd.Memory.Kernel != nil || upd.Memory.KernelTCP != nil || upd.Memory.UseHierarchy != nil || upd.Memory.CheckBeforeUpdate != nil):
		return "memory"
	case upd.CPU != nil && (upd.CPU.Idle != nil || upd.CPU.Burst != nil):
		return "cpu"
	case upd.BlockIO != nil && (upd.BlockIO.LeafWeight != nil || len(upd.BlockIO.WeightDevice) > 0):
		return "blockIO"
	}
	return ""
}

// resolveUpdateThrottles adds an update's per-device limits given by path
// to its resources by device number (as a create resolves them), and to
// next's limits by path, which inspect shows.
func resolveUpdateThrottles(opts *core.UpdateContainerOptions, next *core.ContainerSpec) error {
	byPath := core.ContainerSpec{
		ThrottleReadBpsDevice: opts.ThrottleReadBpsDevice, ThrottleWriteBpsDevice: opts.ThrottleWriteBpsDevice,
		ThrottleReadIOPSDevice: opts.ThrottleReadIOPSDevice, ThrottleWriteIOPSDevice: opts.ThrottleWriteIOPSDevice,
	}
	if len(byPath.ThrottleReadBpsDevice)+len(byPath.ThrottleWriteBpsDevice)+len(byPath.ThrottleReadIOPSDevice)+len(byPath.ThrottleWriteIOPSDevice) == 0 {
		return nil
	}
	res := specs.LinuxResources{}
	if opts.Resources != nil {
		res = *opts.Resources
	}
	if res.BlockIO != nil {
		blk := *res.BlockIO
		res.BlockIO = &blk
	}
	byPath.Resources = &res
	if err := byPath.ResolveThrottleDevices(oci.BlockDevice); err != nil {
		// The update names them as Podman 5's body does.
		var fe *core.FieldError
		if errors.As(err, &fe) {
			wire := map[string]string{"throttleReadBpsDevice": "DeviceReadBPs", "throttleWriteBpsDevice": "DeviceWriteBPs",
				"throttleReadIOPSDevice": "DeviceReadIOPs", "throttleWriteIOPSDevice": "DeviceWriteIOPs"}
			if name, ok := wire[fe.Field]; ok {
				return core.InvalidArgument(name, fe.Err)
			}
		}
		return err
	}
	opts.Resources = &res
	for _, m := range []struct {
		into *map[string]specs.LinuxThrottleDevice
		from map[string]specs.LinuxThrottleDevice
	}{
		{&next.ThrottleReadBpsDevice, opts.ThrottleReadBpsDevice}, {&next.ThrottleWriteBpsDevice, opts.ThrottleWriteBpsDevice},
		{&next.ThrottleReadIOPSDevice, opts.ThrottleReadIOPSDevice}, {&next.ThrottleWriteIOPSDevice, opts.ThrottleWriteIOPSDevice},
	} {
		if len(m.from) == 0 {
			continue
		}
		merged := maps.Clone(*m.into)
		if merged == nil {
			merged = map[string]specs.LinuxThrottleDevice{}
		}
		maps.Copy(merged, m.from)
		*m.into = merged
	}
	return nil
}
