package core

import (
	"fmt"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Bounds of the values the kernel (and so runc) accepts; a create that
// passes them does not fail at start for a number out of range.
const (
	minOOMScoreAdj = -1000
	maxOOMScoreAdj = 1000
	// maxCPUShares is the kernel's MAX_SHARES (cgroup v1 cpu.shares).
	maxCPUShares = 1 << 18
	// maxCPUQuota is the kernel's largest CFS quota in microseconds.
	maxCPUQuota = 1<<44 - 1
	// maxCPUIndex bounds a cpuset's CPU and memory node numbers (the
	// kernel's NR_CPUS is at most 8192).
	maxCPUIndex = 8191
)

// namespacedSysctls are the kernel.* sysctls a container's own IPC
// namespace holds; fs.mqueue.* (IPC) and net.* (network namespace) are
// namespaced as whole trees. Any other sysctl would change the host, which
// runc refuses at start.
var namespacedSysctls = map[string]bool{
	"kernel.msgmax": true, "kernel.msgmnb": true, "kernel.msgmni": true, "kernel.sem": true,
	"kernel.shmall": true, "kernel.shmmax": true, "kernel.shmmni": true, "kernel.shm_rmid_forced": true,
	"kernel.domainname": true, "kernel.hostname": true,
}

// validateValues checks the numeric and named values of a request against
// what the kernel accepts, so that what create accepts, start can run.
func (s *ContainerSpec) validateValues() error {
	if s.OOMScoreAdj != nil && (*s.OOMScoreAdj < minOOMScoreAdj || *s.OOMScoreAdj > maxOOMScoreAdj) {
		return InvalidArgument("oom_score_adj", fmt.Errorf("%d is outside %d..%d", *s.OOMScoreAdj, minOOMScoreAdj, maxOOMScoreAdj))
	}
	for key := range s.Sysctl {
		if err := s.validateSysctl(key); err != nil {
			return InvalidArgument("sysctl", err)
		}
	}
	if s.CPUQuota < -1 || s.CPUQuota > maxCPUQuota || (s.CPUQuota > 0 && s.CPUQuota < 1000) {
		return InvalidArgument("cpu_quota", fmt.Errorf("%d is outside 1000..%d (or -1)", s.CPUQuota, int64(maxCPUQuota)))
	}
	if s.CPUPeriod != 0 && (s.CPUPeriod < 1000 || s.CPUPeriod > 1000000) {
		return InvalidArgument("cpu_period", fmt.Errorf("%d is outside 1000..1000000", s.CPUPeriod))
	}
	if s.Resources != nil {
		return validateResources(s.Resources)
	}
	return nil
}

// validateSysctl accepts a sysctl the container's namespaces hold.
func (s *ContainerSpec) validateSysctl(key string) error {
	if key == "" || strings.ContainsAny(key, "/\x00 ") || strings.Contains(key, "..") {
		return fmt.Errorf("%q is not a sysctl name", key)
	}
	switch {
	case namespacedSysctls[key], strings.HasPrefix(key, "fs.mqueue."):
		if (key == "kernel.hostname" || key == "kernel.domainname") && s.NetNS.NSMode == NetNSHost && s.Hostname == "" {
			return fmt.Errorf("%s cannot be set for a container sharing the host's network and hostname", key)
		}
		return nil
	case strings.HasPrefix(key, "net."):
		if s.NetNS.NSMode == NetNSHost {
			return fmt.Errorf("%s cannot be set for a container on the host's network", key)
		}
		return nil
	}
	return fmt.Errorf("%s is not namespaced: only kernel.msg*, kernel.sem, kernel.shm*, kernel.hostname, kernel.domainname, fs.mqueue.* and net.* can be set for a container", key)
}

// validateResources checks cgroup values against the kernel's bounds.
func validateResources(r *specs.LinuxResources) error {
	if m := r.Memory; m != nil {
		for _, v := range []struct {
			field string
			value *int64
		}{{"limit", m.Limit}, {"reservation", m.Reservation}, {"swap", m.Swap}, {"kernel", m.Kernel}, {"kernelTCP", m.KernelTCP}} {
			if v.value != nil && *v.value < -1 {
				return InvalidArgument("resource_limits.memory."+v.field, fmt.Errorf("%d is negative (-1 is unlimited)", *v.value))
			}
		}
		if m.Swappiness != nil && *m.Swappiness > 100 {
			return InvalidArgument("resource_limits.memory.swappiness", fmt.Errorf("%d is outside 0..100", *m.Swappiness))
		}
	}
	if c := r.CPU; c != nil {
		if c.Shares != nil && *c.Shares > maxCPUShares {
			return InvalidArgument("resource_limits.cpu.shares", fmt.Errorf("%d is above the kernel's maximum of %d", *c.Shares, maxCPUShares))
		}
		if c.Quota != nil && *c.Quota > maxCPUQuota {
			return InvalidArgument("resource_limits.cpu.quota", fmt.Errorf("%d is above the kernel's maximum of %d", *c.Quota, int64(maxCPUQuota)))
		}
		if c.Period != nil && *c.Period > 1000000 {
			return InvalidArgument("resource_limits.cpu.period", fmt.Errorf("%d is outside 1000..1000000", *c.Period))
		}
		if c.Cpus != "" {
			if _, err := CPUSetMax(c.Cpus); err != nil {
				return InvalidArgument("resource_limits.cpu.cpus", err)
			}
		}
		if c.Mems != "" {
			if _, err := CPUSetMax(c.Mems); err != nil {
				return InvalidArgument("resource_limits.cpu.mems", err)
			}
		}
	}
	if p := r.Pids; p != nil && p.Limit != nil && *p.Limit < -1 {
		return InvalidArgument("resource_limits.pids.limit", fmt.Errorf("%d is below -1", *p.Limit))
	}
	if b := r.BlockIO; b != nil && b.Weight != nil && *b.Weight != 0 && (*b.Weight < 10 || *b.Weight > 1000) {
		return InvalidArgument("resource_limits.blockIO.weight", fmt.Errorf("%d is outside 10..1000", *b.Weight))
	}
	return nil
}

// CPUSetMax reads a cpuset list ("0-3,6") and returns its highest number.
func CPUSetMax(list string) (int, error) {
	highest := -1
	for _, part := range strings.Split(strings.TrimSpace(list), ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		first, err := strconv.Atoi(lo)
		if err != nil || first < 0 || first > maxCPUIndex {
			return 0, fmt.Errorf("%q is not a list of numbers and ranges (0-3,6) within 0..%d", list, maxCPUIndex)
		}
		last := first
		if isRange {
			if last, err = strconv.Atoi(hi); err != nil || last < first || last > maxCPUIndex {
				return 0, fmt.Errorf("%q is not a list of numbers and ranges (0-3,6) within 0..%d", list, maxCPUIndex)
			}
		}
		highest = max(highest, last)
	}
	return highest, nil
}

// ParseDevice reads a device request, "source[:destination][:permissions]"
// (podman's --device): the destination defaults to the source, the
// permissions (a combination of r, w and m) to rwm.
func ParseDevice(device string) (source, dest, perms string, err error) {
	parts := strings.Split(device, ":")
	if len(parts) > 3 || parts[0] == "" {
		return "", "", "", fmt.Errorf("%q is not source[:destination][:permissions]", device)
	}
	source, dest, perms = parts[0], parts[0], "rwm"
	switch {
	case len(parts) == 3:
		dest, perms = parts[1], parts[2]
	case len(parts) == 2 && strings.HasPrefix(parts[1], "/"):
		dest = parts[1]
	case len(parts) == 2:
		perms = parts[1]
	}
	if !strings.HasPrefix(source, "/") || !strings.HasPrefix(dest, "/") || strings.ContainsRune(device, 0) {
		return "", "", "", fmt.Errorf("%q: source and destination are absolute paths", device)
	}
	if !validDeviceMode(perms) {
		return "", "", "", fmt.Errorf("%q: permissions %q are not a combination of r, w and m", device, perms)
	}
	return source, dest, perms, nil
}

func validDeviceMode(mode string) bool {
	seen := map[rune]bool{}
	for _, c := range mode {
		if (c != 'r' && c != 'w' && c != 'm') || seen[c] {
			return false
		}
		seen[c] = true
	}
	return mode != ""
}
