package oci

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/berth-project/berth/engine/internal/backend/execution/cgroups"
	"github.com/berth-project/berth/engine/internal/backend/execution/seccomp"
	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/shared/rlimit"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// Host is what the engine's own process may grant a container.
type Host struct {
	// HardLimits maps an RLIMIT_* name to the engine's hard limit; a
	// container's limit can never exceed it (there is no CAP_SYS_RESOURCE).
	HardLimits map[string]uint64
	// BoundingCaps is the engine's capability bounding set ("CAP_...").
	BoundingCaps []string
	// SwapAccounting tells whether memory.memsw is available (cgroup v1).
	SwapAccounting bool
	// Seccomp tells whether the kernel filters system calls; without it
	// containers run unfiltered and info says so.
	Seccomp bool
}

// rlimitNames maps the spec's rlimit names to their resources; the pause
// process (runtime) sets its limits through the same table.
var rlimitNames = map[string]int{
	"RLIMIT_AS": unix.RLIMIT_AS, "RLIMIT_CORE": unix.RLIMIT_CORE, "RLIMIT_CPU": unix.RLIMIT_CPU,
	"RLIMIT_DATA": unix.RLIMIT_DATA, "RLIMIT_FSIZE": unix.RLIMIT_FSIZE, "RLIMIT_LOCKS": unix.RLIMIT_LOCKS,
	"RLIMIT_MEMLOCK": unix.RLIMIT_MEMLOCK, "RLIMIT_MSGQUEUE": unix.RLIMIT_MSGQUEUE, "RLIMIT_NICE": unix.RLIMIT_NICE,
	"RLIMIT_NOFILE": unix.RLIMIT_NOFILE, "RLIMIT_NPROC": unix.RLIMIT_NPROC, "RLIMIT_RSS": unix.RLIMIT_RSS,
	"RLIMIT_RTPRIO": unix.RLIMIT_RTPRIO, "RLIMIT_RTTIME": unix.RLIMIT_RTTIME, "RLIMIT_SIGPENDING": unix.RLIMIT_SIGPENDING,
	"RLIMIT_STACK": unix.RLIMIT_STACK,
}

// DetectHost reads the engine's rlimits, capability bounding set and swap accounting.
func DetectHost() (Host, error) {
	h := Host{HardLimits: map[string]uint64{}}
	for name, res := range rlimitNames {
		var rl unix.Rlimit
		if err := unix.Getrlimit(res, &rl); err != nil {
			return h, fmt.Errorf("getrlimit %s: %w", name, err)
		}
		h.HardLimits[name] = rl.Max
	}
	caps, err := boundingCaps()
	if err != nil {
		return h, err
	}
	h.BoundingCaps = caps
	h.SwapAccounting = cgroups.Host().SwapAccounting()
	h.Seccomp = seccomp.Supported()
	return h, nil
}

func boundingCaps() ([]string, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil, err
	}
	var mask uint64
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			mask, err = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return nil, fmt.Errorf("parse CapBnd: %w", err)
			}
		}
	}
	return CapabilityNames(mask), nil
}

// CapabilityNames names the capabilities set in a /proc status mask
// ("CAP_CHOWN" ...), in bit order; bits unknown to the engine are left out.
func CapabilityNames(mask uint64) []string {
	var out []string
	for i, name := range capabilityNames {
		if mask&(1<<uint(i)) != 0 {
			out = append(out, name)
		}
	}
	return out
}

// AllCapabilities is the mask of every capability the engine knows.
const AllCapabilities = uint64(1)<<41 - 1

// capabilityNames is indexed by capability number.
var capabilityNames = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE",
	"CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE",
	"CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT",
	"CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE",
	"CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN",
	"CAP_SYSLOG", "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
	"CAP_CHECKPOINT_RESTORE",
}

func knownCapability(c string) bool {
	for _, n := range capabilityNames {
		if n == c {
			return true
		}
	}
	return false
}

// defaultRlimits are Podman's defaults for a container; Rlimits clamps them
// to the engine's own hard limits.
var defaultRlimits = []rlimit.Rlimit{
	{Type: "RLIMIT_NOFILE", Soft: 1048576, Hard: 1048576},
	{Type: "RLIMIT_NPROC", Soft: 4194304, Hard: 4194304},
}

// RlimitResource is the resource number of a spec rlimit name
// ("RLIMIT_NOFILE"); false when the name is unknown.
func RlimitResource(name string) (int, bool) {
	res, ok := rlimitNames[name]
	return res, ok
}

// RlimitName normalises "nofile" or "rlimit_nofile" to "RLIMIT_NOFILE";
// false when the name is unknown.
func RlimitName(t string) (string, bool) {
	n := strings.ToUpper(strings.TrimSpace(t))
	if !strings.HasPrefix(n, "RLIMIT_") {
		n = "RLIMIT_" + n
	}
	_, ok := rlimitNames[n]
	return n, ok
}

// Rlimits returns the process rlimits: the defaults overridden by the
// request, each clamped to the engine's hard limit (with a warning when a
// requested value had to be lowered; Unlimited counts as a request for the
// maximum and is lowered silently).
func Rlimits(req []rlimit.Rlimit, host Host) ([]specs.POSIXRlimit, []string, error) {
	byName := map[string]rlimit.Rlimit{}
	var order []string
	for _, r := range defaultRlimits {
		byName[r.Type] = r
		order = append(order, r.Type)
	}
	requested := map[string]bool{}
	for i, r := range req {
		name, ok := RlimitName(r.Type)
		if !ok {
			return nil, nil, core.InvalidArgument(fmt.Sprintf("r_limits[%d].type", i), fmt.Errorf("unknown rlimit %q", r.Type))
		}
		if r.Soft > r.Hard {
			return nil, nil, core.InvalidArgument(fmt.Sprintf("r_limits[%d]", i), fmt.Errorf("%s soft limit %d exceeds hard limit %d", r.Type, r.Soft, r.Hard))
		}
		if _, ok := byName[name]; !ok {
			order = append(order, name)
		}
		byName[name] = rlimit.Rlimit{Type: name, Soft: r.Soft, Hard: r.Hard}
		requested[name] = true
	}
	var out []specs.POSIXRlimit
	var warnings []string
	for _, name := range order {
		r := byName[name]
		if max, ok := host.HardLimits[name]; ok && max != rlimit.Unlimited {
			if r.Hard > max {
				if requested[name] && r.Hard != rlimit.Unlimited {
					warnings = append(warnings, fmt.Sprintf("%s hard limit %d lowered to the engine's hard limit %d", name, r.Hard, max))
				}
				r.Hard = max
			}
			if r.Soft > max {
				r.Soft = max
			}
		}
		out = append(out, specs.POSIXRlimit{Type: name, Hard: r.Hard, Soft: r.Soft})
	}
	return out, warnings, nil
}

// minMemory is the smallest memory limit runc accepts in practice.
const minMemory = 6 << 20

// Resources validates the request's cgroup resources and returns them as the
// runtime takes them, with warnings for settings the host cannot honour.
func Resources(s *core.ContainerSpec, host Host) (*specs.LinuxResources, []string, error) {
	r := &specs.LinuxResources{}
	var warnings []string
	if err := resources(r, s, host, &warnings); err != nil {
		return nil, nil, err
	}
	return r, warnings, nil
}

func resources(r *specs.LinuxResources, s *core.ContainerSpec, host Host, warnings *[]string) error {
	if s.Resources != nil {
		if m := s.Resources.Memory; m != nil {
			if m.Limit != nil && *m.Limit != 0 && *m.Limit < minMemory {
				return core.InvalidArgument("resource_limits.memory.limit", fmt.Errorf("minimum memory limit is 6MB, got %d", *m.Limit))
			}
			mem := *m
			if mem.Swap != nil && !host.SwapAccounting {
				*warnings = append(*warnings, "memory swap limit discarded: the kernel has no swap accounting")
				mem.Swap = nil
			}
			if mem.Swap != nil && mem.Limit != nil && *mem.Swap > 0 && *mem.Swap < *mem.Limit {
				return core.InvalidArgument("resource_limits.memory.swap", fmt.Errorf("memory+swap limit %d is lower than the memory limit %d", *mem.Swap, *mem.Limit))
			}
			r.Memory = &mem
		}
		if c := s.Resources.CPU; c != nil {
			cpu := *c
			if cpu.Shares != nil && *cpu.Shares != 0 && *cpu.Shares < 2 {
				return core.InvalidArgument("resource_limits.cpu.shares", fmt.Errorf("minimum is 2, got %d", *cpu.Shares))
			}
			if cpu.Period != nil && *cpu.Period != 0 && (*cpu.Period < 1000 || *cpu.Period > 1000000) {
				return core.InvalidArgument("resource_limits.cpu.period", fmt.Errorf("%d is outside 1000..1000000", *cpu.Period))
			}
			if cpu.Quota != nil && *cpu.Quota != 0 && *cpu.Quota != -1 && *cpu.Quota < 1000 {
				return core.InvalidArgument("resource_limits.cpu.quota", fmt.Errorf("minimum is 1000, got %d", *cpu.Quota))
			}
			r.CPU = &cpu
		}
		if b := s.Resources.BlockIO; b != nil && !BlockIOEmpty(b) {
			if ctl := cgroups.Host().IOController(); !cgroups.Host().HasController(ctl) {
				return core.InvalidArgument("resource_limits.blockIO", fmt.Errorf("the host has no %s cgroup controller", ctl))
			}
			if ((b.Weight != nil && *b.Weight != 0) || len(b.WeightDevice) > 0) && !cgroups.Host().IOWeights() {
				return core.InvalidArgument("resource_limits.blockIO.weight", errors.New("the host's I/O scheduler offers no cgroup weights (no CFQ or BFQ)"))
			}
			blk := *b
			r.BlockIO = &blk
		}
		if p := s.Resources.Pids; p != nil {
			pids := *p
			if pids.Limit != nil && *pids.Limit < -1 {
				return core.InvalidArgument("resource_limits.pids.limit", fmt.Errorf("%d is below -1", *pids.Limit))
			}
			r.Pids = &pids
		}
	}
	if s.CPUPeriod != 0 || s.CPUQuota != 0 {
		if r.CPU == nil {
			r.CPU = &specs.LinuxCPU{}
		}
		if s.CPUPeriod != 0 {
			p := s.CPUPeriod
			r.CPU.Period = &p
		}
		if s.CPUQuota != 0 {
			q := s.CPUQuota
			r.CPU.Quota = &q
		}
	}
	return nil
}

// BlockIOEmpty reports whether b asks for nothing (podman sends an empty
// object).
func BlockIOEmpty(b *specs.LinuxBlockIO) bool {
	return (b.Weight == nil || *b.Weight == 0) && (b.LeafWeight == nil || *b.LeafWeight == 0) && len(b.WeightDevice) == 0 &&
		len(b.ThrottleReadBpsDevice) == 0 && len(b.ThrottleWriteBpsDevice) == 0 &&
		len(b.ThrottleReadIOPSDevice) == 0 && len(b.ThrottleWriteIOPSDevice) == 0
}
