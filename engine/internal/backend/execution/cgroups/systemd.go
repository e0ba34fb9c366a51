package cgroups

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// The cgroup managers (Podman's --cgroup-manager): cgroupfs has runc
// create directories itself below the engine's parent ("/berth"); systemd
// has runc ask systemd for a transient scope per container (berth-ID.scope)
// and the engine ask it for a slice per pod, so that systemd, which owns
// the hierarchy where it runs as PID 1 on cgroup v2, knows every cgroup
// and neither fights nor garbage-collects them.
const (
	ManagerCgroupfs = "cgroupfs"
	ManagerSystemd  = "systemd"
)

// DefaultSlice is the parent of containers and pods under the systemd
// manager, as "/berth" is under cgroupfs.
const DefaultSlice = "berth.slice"

// SystemdBooted reports whether systemd runs as PID 1 (sd_booted(3): it
// creates /run/systemd/system early at boot).
func SystemdBooted() bool {
	fi, err := os.Lstat("/run/systemd/system")
	return err == nil && fi.IsDir()
}

// DefaultManager is the manager Podman would pick on this host: systemd
// where systemd runs as PID 1 on the unified hierarchy, else cgroupfs.
func DefaultManager() string {
	if SystemdBooted() && Host().Unified() {
		return ManagerSystemd
	}
	return ManagerCgroupfs
}

// CheckManager validates a --cgroup-manager value for this host.
func CheckManager(name string) error {
	switch name {
	case ManagerCgroupfs:
		return nil
	case ManagerSystemd:
		if !SystemdBooted() {
			return errors.New(`"systemd" needs systemd running as PID 1, and it does not run on this host (no /run/systemd/system)`)
		}
		return nil
	}
	return fmt.Errorf("unknown cgroup manager %q (systemd or cgroupfs)", name)
}

// Placement is where one container's cgroup lives.
type Placement struct {
	// Path is the cgroup's path below the hierarchy's root
	// ("/berth/berth-ID", "/berth.slice/berth-ID.scope"): what stats,
	// top, OOM and cleanup read.
	Path string
	// OCI is the spec's cgroupsPath: Path under cgroupfs,
	// "SLICE:berth:ID" under systemd (runc --systemd-cgroup).
	OCI string
	// Systemd: runc must be run with --systemd-cgroup; Unit is the scope.
	Systemd bool
	Unit    string
}

// ContainerPlacement places container id below parent: a cgroupfs path
// ("/berth") or, with systemd, a slice name ("berth.slice").
func ContainerPlacement(manager, parent, id string) (Placement, error) {
	if manager != ManagerSystemd {
		p := path.Join(parent, "berth-"+id)
		return Placement{Path: p, OCI: p}, nil
	}
	dir, err := SliceDir(parent)
	if err != nil {
		return Placement{}, err
	}
	unit := "berth-" + id + ".scope"
	return Placement{Path: path.Join(dir, unit), OCI: parent + ":berth:" + id, Systemd: true, Unit: unit}, nil
}

// ConmonScope is the scope conmon of container id is moved into under the
// systemd manager (Podman's libpod-conmon-ID.scope): outside the engine's
// own unit, so that stopping or restarting the engine's service does not
// take the containers' monitors with it.
func ConmonScope(id string) string { return "berth-conmon-" + id + ".scope" }

// PodSlice is the slice of pod id below slice parent ("berth.slice" gives
// "berth-pod_ID.slice"): a slice name's dashes are its path.
func PodSlice(parent, id string) string {
	base := strings.TrimSuffix(parent, ".slice")
	if base == "-" || base == "" {
		return "berth_pod_" + id + ".slice"
	}
	return base + "-berth_pod_" + id + ".slice"
}

// CheckSlice validates a systemd slice name given as a cgroup parent.
func CheckSlice(name string) error {
	_, err := SliceDir(name)
	return err
}

// SliceDir is the cgroup path of slice name, as systemd lays slices out:
// "a-b.slice" is /a.slice/a-b.slice; "-.slice" is the root.
func SliceDir(name string) (string, error) {
	base, ok := strings.CutSuffix(name, ".slice")
	if !ok || base == "" {
		return "", fmt.Errorf("%q is not a systemd slice name (NAME.slice)", name)
	}
	if base == "-" {
		return "/", nil
	}
	if strings.HasPrefix(base, "-") || strings.HasSuffix(base, "-") || strings.Contains(base, "--") {
		return "", fmt.Errorf("%q is not a valid slice name (a dash separates levels)", name)
	}
	for _, r := range base {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(":_.-\\", r)) {
			return "", fmt.Errorf("%q is not a valid slice name (character %q)", name, r)
		}
	}
	dir, prefix := "/", ""
	for _, part := range strings.Split(base, "-") {
		prefix += part
		dir = path.Join(dir, prefix+".slice")
		prefix += "-"
	}
	return dir, nil
}

// systemd is the engine's connection to systemd's D-Bus API, opened on
// first use.
var sd struct {
	mu   sync.Mutex
	conn *sddbus.Conn
}

func systemdConn(ctx context.Context) (*sddbus.Conn, error) {
	sd.mu.Lock()
	defer sd.mu.Unlock()
	if sd.conn != nil && sd.conn.Connected() {
		return sd.conn, nil
	}
	// systemd's private socket needs no dbus-daemon; the system bus is
	// the fallback.
	c, err := sddbus.NewSystemdConnectionContext(ctx)
	if err != nil {
		if c, err = sddbus.NewSystemConnectionContext(ctx); err != nil {
			return nil, fmt.Errorf("connect to systemd over D-Bus: %w", err)
		}
	}
	sd.conn = c
	return c, nil
}

// runJob starts a systemd job and waits for its result.
func runJob(ctx context.Context, what string, start func(chan<- string) (int, error)) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ch := make(chan string, 1)
	if _, err := start(ch); err != nil {
		return fmt.Errorf("systemd: %s: %w", what, err)
	}
	select {
	case res := <-ch:
		if res != "done" {
			return fmt.Errorf("systemd: %s: job %s", what, res)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("systemd: %s: %w", what, ctx.Err())
	}
}

// unitExists is the D-Bus error of starting a unit that is already there.
func unitExists(err error) bool {
	var de godbus.Error
	return errors.As(err, &de) && de.Name == "org.freedesktop.systemd1.UnitExists"
}

// StartSlice creates transient slice name below its parent with the
// limits r, or sets the limits of the slice that is already there.
func StartSlice(ctx context.Context, name string, r *specs.LinuxResources) error {
	props, err := sliceProperties(r)
	if err != nil {
		return err
	}
	conn, err := systemdConn(ctx)
	if err != nil {
		return err
	}
	start := append([]sddbus.Property{sddbus.PropDescription("berth pod " + name), {Name: "DefaultDependencies", Value: godbus.MakeVariant(false)}}, props...)
	err = runJob(ctx, "start "+name, func(ch chan<- string) (int, error) {
		return conn.StartTransientUnitContext(ctx, name, "replace", start, ch)
	})
	if err != nil && unitExists(err) {
		if len(props) == 0 {
			return nil
		}
		return conn.SetUnitPropertiesContext(ctx, name, true, props...)
	}
	return err
}

// MoveToScope moves pids into a new transient scope unit in slice.
func MoveToScope(ctx context.Context, unit, slice string, pids ...int) error {
	conn, err := systemdConn(ctx)
	if err != nil {
		return err
	}
	ps := make([]uint32, len(pids))
	for i, p := range pids {
		ps[i] = uint32(p)
	}
	props := []sddbus.Property{sddbus.PropSlice(slice), sddbus.PropPids(ps...), sddbus.PropDescription("berth " + unit),
		{Name: "DefaultDependencies", Value: godbus.MakeVariant(false)}, {Name: "CollectMode", Value: godbus.MakeVariant("inactive-or-failed")}}
	return runJob(ctx, "start "+unit, func(ch chan<- string) (int, error) {
		return conn.StartTransientUnitContext(ctx, unit, "replace", props, ch)
	})
}

// StopUnit stops a scope or slice and forgets a failed state; a unit
// systemd does not know is no error (it is gone already).
func StopUnit(ctx context.Context, name string) error {
	conn, err := systemdConn(ctx)
	if err != nil {
		return err
	}
	err = runJob(ctx, "stop "+name, func(ch chan<- string) (int, error) {
		return conn.StopUnitContext(ctx, name, "replace", ch)
	})
	conn.ResetFailedUnitContext(ctx, name)
	var de godbus.Error
	if err != nil && errors.As(err, &de) && de.Name == "org.freedesktop.systemd1.NoSuchUnit" {
		return nil
	}
	return err
}

// UnitActive reports whether systemd has unit loaded and active.
func UnitActive(ctx context.Context, name string) bool {
	conn, err := systemdConn(ctx)
	if err != nil {
		return false
	}
	p, err := conn.GetUnitPropertyContext(ctx, name, "ActiveState")
	if err != nil {
		return false
	}
	s, _ := p.Value.Value().(string)
	return s == "active" || s == "activating" || s == "reloading"
}

// sliceProperties maps a pod's limits onto systemd's resource-control
// properties (systemd.resource-control(5)), which systemd writes into the
// slice's cgroup and keeps there across daemon reloads.
func sliceProperties(r *specs.LinuxResources) ([]sddbus.Property, error) {
	if r == nil {
		return nil, nil
	}
	var out []sddbus.Property
	add := func(name string, v any) { out = append(out, sddbus.Property{Name: name, Value: godbus.MakeVariant(v)}) }
	if c := r.CPU; c != nil {
		if c.Cpus != "" {
			mask, err := cpuMask(c.Cpus)
			if err != nil {
				return nil, fmt.Errorf("resource_limits.cpu.cpus: %w", err)
			}
			add("AllowedCPUs", mask)
		}
		if c.Mems != "" {
			mask, err := cpuMask(c.Mems)
			if err != nil {
				return nil, fmt.Errorf("resource_limits.cpu.mems: %w", err)
			}
			add("AllowedMemoryNodes", mask)
		}
		if c.Shares != nil && *c.Shares >= 2 {
			add("CPUWeight", 1+((*c.Shares-2)*9999)/262142)
		}
		if c.Quota != nil && *c.Quota > 0 {
			period := uint64(100000)
			if c.Period != nil && *c.Period > 0 {
				period = *c.Period
			}
			// systemd rounds the quota per second to 10 ms; round up so a
			// small quota is not lost.
			perSec := uint64(*c.Quota) * 1000000 / period
			if rem := perSec % 10000; rem != 0 {
				perSec += 10000 - rem
			}
			add("CPUQuotaPerSecUSec", perSec)
			add("CPUQuotaPeriodUSec", period)
		}
	}
	if m := r.Memory; m != nil && m.Limit != nil && *m.Limit > 0 {
		add("MemoryMax", uint64(*m.Limit))
		if m.Swap != nil {
			switch {
			case *m.Swap == -1:
				add("MemorySwapMax", uint64(math.MaxUint64))
			case *m.Swap >= *m.Limit:
				add("MemorySwapMax", uint64(*m.Swap-*m.Limit))
			}
		}
	}
	if p := r.Pids; p != nil && p.Limit != nil {
		v := uint64(math.MaxUint64)
		if *p.Limit > 0 {
			v = uint64(*p.Limit)
		}
		add("TasksMax", v)
	}
	return out, nil
}

// cpuMask turns a cpuset list ("0-2,4") into systemd's bitmask: byte i
// holds CPUs 8i..8i+7, lowest bit first.
func cpuMask(list string) ([]byte, error) {
	var mask []byte
	for _, part := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("%q is not a CPU list", list)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b > 8191 {
				return nil, fmt.Errorf("%q is not a CPU list", list)
			}
		}
		for i := a; i <= b; i++ {
			for len(mask) <= i/8 {
				mask = append(mask, 0)
			}
			mask[i/8] |= 1 << (i % 8)
		}
	}
	return mask, nil
}

// The split mode (podman --cgroups split) places a container and its
// conmon in sub-cgroups of the cgroup of the process that asked: for an API
// served by the engine, the engine's own cgroup (the Podman service's, in
// Podman's case), e.g. /system.slice/berth.service. On the unified
// hierarchy a cgroup with processes cannot hand controllers to children, so
// the first split moves the engine's cgroup's processes into a leaf,
// SPLIT/berth-engine, as Podman moves itself into a "runtime" leaf; the
// engine's cgroup then holds only children, and containers get
// SPLIT/berth-ID with conmon in SPLIT/berth-conmon-ID.
var split struct {
	once   sync.Once
	parent string
	err    error
}

// SplitParent is the cgroup split containers are placed under, prepared
// once per process.
func SplitParent() (string, error) {
	split.once.Do(func() { split.parent, split.err = prepareSplit(Host()) })
	return split.parent, split.err
}

func prepareSplit(h *Hierarchy) (string, error) {
	if !h.Unified() {
		return "", errors.New("it needs the unified cgroup hierarchy (v2): on v1 the engine's cgroups differ per controller")
	}
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	own := ""
	for _, line := range strings.Split(string(data), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			own = p
		}
	}
	if own == "" || own == "/" {
		return "", errors.New("the engine runs in the root cgroup, which is not its own to split")
	}
	dir := h.Dir("", own)
	leaf := filepath.Join(dir, "berth-engine")
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("creating %s: %w", leaf, err)
	}
	// Processes may come and go while they move: a few rounds.
	for i := 0; i < 10; i++ {
		procs, err := readPids(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			return "", err
		}
		if len(procs) == 0 {
			break
		}
		for _, p := range procs {
			if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(p)), 0o644); err != nil && !errors.Is(err, syscall.ESRCH) {
				return "", fmt.Errorf("moving process %d into %s: %w", p, leaf, err)
			}
		}
	}
	avail, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return "", err
	}
	for _, c := range strings.Fields(string(avail)) {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+c), 0o644); err != nil {
			return "", fmt.Errorf("enabling %s below %s: %w", c, own, err)
		}
	}
	return own, nil
}

// SplitPlacement places container id under the split parent.
func SplitPlacement(parent, id string) Placement {
	p := path.Join(parent, "berth-"+id)
	return Placement{Path: p, OCI: p}
}

// SplitConmonCgroup is the cgroup conmon of a split container runs in.
func SplitConmonCgroup(parent, id string) string { return path.Join(parent, "berth-conmon-"+id) }

// MoveToCgroup moves pid into cgroup cg of the unified hierarchy, creating it.
func MoveToCgroup(cg string, pid int) error {
	dir := Host().Dir("", cg)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
}

// RemoveEmpty removes cgroup cg of the unified hierarchy once its
// processes are gone (no error where it is gone already).
func RemoveEmpty(cg string) error {
	dir := Host().Dir("", cg)
	var err error
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err = os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
	}
	return err
}

// WatchOOM calls seen when the OOM killer kills a process of cgroup cg
// (memory.events' oom_kill of the unified hierarchy rises above zero)
// until the cgroup is removed. The engine needs it under the systemd
// manager, where systemd removes a container's scope as soon as it is
// empty, before the exit is handled. The watch is set before WatchOOM
// returns; reading runs on its own goroutine, which closes done when it
// ends (the kill seen, or the cgroup gone). The file is kept open from the
// start and read through that descriptor, so a count written just before
// systemd removes the scope is still read where the path is gone.
func WatchOOM(cg string, seen func()) (done <-chan struct{}, err error) {
	h := Host()
	if !h.Unified() {
		return nil, nil
	}
	file := filepath.Join(h.Dir("memory", cg), "memory.events")
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		f.Close()
		return nil, err
	}
	if _, err := unix.InotifyAddWatch(fd, file, unix.IN_MODIFY); err != nil {
		unix.Close(fd)
		f.Close()
		return nil, err
	}
	ch := make(chan struct{})
	killed := func() bool {
		buf := make([]byte, 512)
		n, err := f.ReadAt(buf, 0)
		if n == 0 && err != nil {
			return false
		}
		kv := parseKeyValues(string(buf[:n]))
		return kv["oom_kill"] > 0
	}
	go func() {
		defer close(ch)
		defer f.Close()
		defer unix.Close(fd)
		buf := make([]byte, 4096)
		for {
			if killed() {
				seen()
				return
			}
			n, err := unix.Read(fd, buf)
			if err != nil && err != unix.EINTR {
				return
			}
			// IN_IGNORED: the cgroup is gone; what it counted last was
			// read above or is read once more here.
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				if ev.Mask&unix.IN_IGNORED != 0 {
					if killed() {
						seen()
					}
					return
				}
				off += unix.SizeofInotifyEvent + int(ev.Len)
			}
		}
	}()
	return ch, nil
}
