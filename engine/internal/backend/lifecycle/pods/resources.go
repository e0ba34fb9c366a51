package pods

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/core"
)

// Bounds of the limits a pod cgroup takes, as the kernel (cgroup v1) and
// runc accept them.
const (
	minPodMemory   = 6 << 20
	minCPUShares   = 2
	maxCPUShares   = 262144
	minCPUPeriod   = 1000
	maxCPUPeriod   = 1000000
	minCPUQuota    = 1000
	maxCPUSetIndex = 8191
)

// normalizeResources checks a pod's resource limits and keeps only what is
// set: CPU shares, quota and period (cpu_period and cpu_quota, which the
// client derives from --cpus, are folded in), cpuset CPUs and memory nodes,
// the memory and memory+swap limits and the pids limit. Anything else is
// refused naming the field. Limits need the pod's own cgroup (share_parent).
func normalizeResources(spec *core.PodSpec) error {
	if len(spec.ThrottleReadBpsDevice) > 0 && !emptyJSON(spec.ThrottleReadBpsDevice) {
		return core.InvalidArgument("throttleReadBpsDevice", errors.New("pods take no block I/O limits"))
	}
	in := spec.ResourceLimits
	if in == nil {
		in = &specs.LinuxResources{}
	}
	for field, set := range map[string]bool{
		"resource_limits.devices": len(in.Devices) > 0, "resource_limits.blockIO": in.BlockIO != nil,
		"resource_limits.hugepageLimits": len(in.HugepageLimits) > 0, "resource_limits.network": in.Network != nil,
		"resource_limits.rdma": len(in.Rdma) > 0, "resource_limits.unified": len(in.Unified) > 0,
	} {
		if set {
			return core.InvalidArgument(field, errors.New("pods take CPU, cpuset, memory and pids limits only"))
		}
	}
	out := &specs.LinuxResources{}
	cpu, err := podCPU(in.CPU, spec.CPUPeriod, spec.CPUQuota)
	if err != nil {
		return err
	}
	out.CPU = cpu
	if out.Memory, err = podMemory(in.Memory); err != nil {
		return err
	}
	if p := in.Pids; p != nil && p.Limit != nil && *p.Limit != 0 {
		if *p.Limit < -1 {
			return core.InvalidArgument("resource_limits.pids.limit", fmt.Errorf("%d is below -1", *p.Limit))
		}
		out.Pids = &specs.LinuxPids{Limit: p.Limit}
	}
	if out.CPU == nil && out.Memory == nil && out.Pids == nil {
		spec.ResourceLimits = nil
		return nil
	}
	if spec.ShareParent != nil && !*spec.ShareParent {
		return core.InvalidArgument("share_parent", errors.New("resource limits need the pod's own cgroup (share_parent)"))
	}
	spec.ResourceLimits = out
	return nil
}

// podCPU keeps the CPU limits that are set; period and quota from the
// request's top level fill what resource_limits.cpu leaves out.
func podCPU(c *specs.LinuxCPU, period uint64, quota int64) (*specs.LinuxCPU, error) {
	if c == nil {
		c = &specs.LinuxCPU{}
	}
	for field, set := range map[string]bool{
		"resource_limits.cpu.realtimeRuntime": c.RealtimeRuntime != nil && *c.RealtimeRuntime != 0,
		"resource_limits.cpu.realtimePeriod":  c.RealtimePeriod != nil && *c.RealtimePeriod != 0,
		"resource_limits.cpu.burst":           c.Burst != nil && *c.Burst != 0,
		"resource_limits.cpu.idle":            c.Idle != nil && *c.Idle != 0,
	} {
		if set {
			return nil, core.InvalidArgument(field, errors.New("is not a pod limit this engine sets"))
		}
	}
	out := &specs.LinuxCPU{Cpus: c.Cpus, Mems: c.Mems}
	if c.Shares != nil && *c.Shares != 0 {
		if *c.Shares < minCPUShares || *c.Shares > maxCPUShares {
			return nil, core.InvalidArgument("resource_limits.cpu.shares", fmt.Errorf("%d is outside %d..%d", *c.Shares, minCPUShares, maxCPUShares))
		}
		out.Shares = c.Shares
	}
	p := period
	if c.Period != nil && *c.Period != 0 {
		p = *c.Period
	}
	if p != 0 {
		if p < minCPUPeriod || p > maxCPUPeriod {
			return nil, core.InvalidArgument("resource_limits.cpu.period", fmt.Errorf("%d is outside %d..%d", p, minCPUPeriod, maxCPUPeriod))
		}
		out.Period = &p
	}
	q := quota
	if c.Quota != nil && *c.Quota != 0 {
		q = *c.Quota
	}
	if q != 0 {
		if q != -1 && q < minCPUQuota {
			return nil, core.InvalidArgument("resource_limits.cpu.quota", fmt.Errorf("minimum is %d (or -1), got %d", minCPUQuota, q))
		}
		out.Quota = &q
	}
	for field, list := range map[string]string{"resource_limits.cpu.cpus": c.Cpus, "resource_limits.cpu.mems": c.Mems} {
		if list == "" {
			continue
		}
		if err := checkCPUSet(list); err != nil {
			return nil, core.InvalidArgument(field, err)
		}
	}
	if out.Shares == nil && out.Period == nil && out.Quota == nil && out.Cpus == "" && out.Mems == "" {
		return nil, nil
	}
	return out, nil
}

// podMemory keeps the memory limit and the memory+swap limit (-1:
// unlimited swap).
func podMemory(m *specs.LinuxMemory) (*specs.LinuxMemory, error) {
	if m == nil {
		return nil, nil
	}
	for field, set := range map[string]bool{
		"resource_limits.memory.reservation":       m.Reservation != nil && *m.Reservation != 0,
		"resource_limits.memory.kernel":            m.Kernel != nil && *m.Kernel != 0,
		"resource_limits.memory.kernelTCP":         m.KernelTCP != nil && *m.KernelTCP != 0,
		"resource_limits.memory.swappiness":        m.Swappiness != nil,
		"resource_limits.memory.disableOOMKiller":  m.DisableOOMKiller != nil && *m.DisableOOMKiller,
		"resource_limits.memory.useHierarchy":      m.UseHierarchy != nil,
		"resource_limits.memory.checkBeforeUpdate": m.CheckBeforeUpdate != nil,
	} {
		if set {
			return nil, core.InvalidArgument(field, errors.New("is not a pod limit this engine sets"))
		}
	}
	out := &specs.LinuxMemory{}
	if m.Limit != nil && *m.Limit != 0 && *m.Limit != -1 {
		if *m.Limit < minPodMemory {
			return nil, core.InvalidArgument("resource_limits.memory.limit", fmt.Errorf("minimum memory limit is 6MB, got %d", *m.Limit))
		}
		out.Limit = m.Limit
	}
	if m.Swap != nil && *m.Swap != 0 {
		switch {
		case out.Limit == nil:
			return nil, core.InvalidArgument("resource_limits.memory.swap", errors.New("a memory+swap limit needs a memory limit"))
		case *m.Swap != -1 && *m.Swap < *out.Limit:
			return nil, core.InvalidArgument("resource_limits.memory.swap", fmt.Errorf("memory+swap limit %d is lower than the memory limit %d", *m.Swap, *out.Limit))
		}
		out.Swap = m.Swap
	}
	if out.Limit == nil {
		return nil, nil
	}
	return out, nil
}

// checkCPUSet checks a cpuset list ("0-3,5") as the kernel reads it:
// numbers and ascending ranges, separated by commas. Whether the CPUs and
// nodes exist is the kernel's answer when the list is written.
func checkCPUSet(list string) error {
	for _, part := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := cpuIndex(lo)
		if err != nil {
			return fmt.Errorf("%q: %w", list, err)
		}
		if !isRange {
			continue
		}
		last, err := cpuIndex(hi)
		if err != nil {
			return fmt.Errorf("%q: %w", list, err)
		}
		if last < first {
			return fmt.Errorf("%q: range %s is reversed", list, part)
		}
	}
	return nil
}

func cpuIndex(s string) (int, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a CPU or node number", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > maxCPUSetIndex {
		return 0, fmt.Errorf("%q is above %d", s, maxCPUSetIndex)
	}
	return n, nil
}
