package containers

import (
	"context"
	"fmt"
	"slices"

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
	if opts.Resources != nil && rec.NoCgroup() {
		return fmt.Errorf("cannot update the resources of container %s, which runs without a cgroup of its own (cgroups_mode disabled): %w", rec.Name, core.ErrNoCgroup)
	}
	if opts.Resources != nil {
		merged := mergeResources(rec.Spec.Resources, opts.Resources)
		next.Resources = merged
		probe := next
		if _, err := m.validateResources(&probe); err != nil {
			return err
		}
		if rec.State == core.StateRunning || rec.State == core.StatePaused || rec.State == core.StateCreated {
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
	if err := m.update(ctx, e, func(r *record) { r.Spec = next }); err != nil {
		return err
	}
	// A later init regenerates config.json from the updated request.
	m.emit(ctx, core.EventUpdate, m.snapshot(e), nil)
	return nil
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

// RecordRestart increments a container's restart count.
func (m *Manager) RecordRestart(ctx context.Context, nameOrID string) (int, error) {
	// A client that goes away must not leave a change half done.
	ctx = context.WithoutCancel(ctx)
	e, err := m.lookup(nameOrID)
	if err != nil {
		return 0, err
	}
	var n int
	err = m.update(ctx, e, func(r *record) {
		r.RestartCount++
		n = r.RestartCount
	})
	return n, err
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
		mem := specs.LinuxMemory{}
		if out.Memory != nil {
			mem = *out.Memory
		}
		if upd.Memory.Limit != nil {
			mem.Limit = upd.Memory.Limit
		}
		if upd.Memory.Swap != nil {
			mem.Swap = upd.Memory.Swap
		}
		if upd.Memory.Reservation != nil {
			mem.Reservation = upd.Memory.Reservation
		}
		out.Memory = &mem
	}
	if upd.CPU != nil {
		cpu := specs.LinuxCPU{}
		if out.CPU != nil {
			cpu = *out.CPU
		}
		if upd.CPU.Shares != nil {
			cpu.Shares = upd.CPU.Shares
		}
		if upd.CPU.Quota != nil {
			cpu.Quota = upd.CPU.Quota
		}
		if upd.CPU.Period != nil {
			cpu.Period = upd.CPU.Period
		}
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
		blk := specs.LinuxBlockIO{}
		if out.BlockIO != nil {
			blk = *out.BlockIO
		}
		if upd.BlockIO.Weight != nil {
			blk.Weight = upd.BlockIO.Weight
		}
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
	return out
}
