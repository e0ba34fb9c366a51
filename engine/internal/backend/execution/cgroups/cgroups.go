// Package cgroups is the engine's one seam onto the host's cgroup hierarchy.
// Hosts differ: these machines run the hybrid v1 layout (one hierarchy per
// controller under /sys/fs/cgroup/CONTROLLER), the hosts users have
// (Debian 12, Ubuntu, Fedora, RHEL 9) the unified v2 hierarchy (one tree,
// control files named differently: memory.max, cpu.stat, io.stat,
// cgroup.freeze). Which one the host runs is found once, at start; every
// reader and writer of cgroup files in the engine asks a Hierarchy instead
// of building /sys/fs/cgroup paths itself, and info reports what it found.
package cgroups

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// DefaultRoot is where the host mounts its cgroup hierarchies.
const DefaultRoot = "/sys/fs/cgroup"

// Hierarchy is the host's cgroup layout below one root.
type Hierarchy struct {
	root    string
	unified bool
}

var (
	hostOnce sync.Once
	hostH    *Hierarchy
	byRoot   sync.Map // root -> *Hierarchy
)

// Host is the hierarchy mounted at /sys/fs/cgroup, detected on first use.
func Host() *Hierarchy {
	hostOnce.Do(func() { hostH = detect(DefaultRoot) })
	return hostH
}

// At is the hierarchy at root ("" for the host's); detected once per root.
func At(root string) *Hierarchy {
	if root == "" || root == DefaultRoot {
		return Host()
	}
	if h, ok := byRoot.Load(root); ok {
		return h.(*Hierarchy)
	}
	h, _ := byRoot.LoadOrStore(root, detect(root))
	return h.(*Hierarchy)
}

// detect tells the unified hierarchy (a cgroup2 mount, or a root with
// cgroup.controllers) from the v1 layout.
func detect(root string) *Hierarchy {
	var fs unix.Statfs_t
	if err := unix.Statfs(root, &fs); err == nil && fs.Type == unix.CGROUP2_SUPER_MAGIC {
		return &Hierarchy{root: root, unified: true}
	}
	_, err := os.Stat(filepath.Join(root, "cgroup.controllers"))
	return &Hierarchy{root: root, unified: err == nil}
}

// Root is where the hierarchy is mounted.
func (h *Hierarchy) Root() string { return h.root }

// Unified reports whether this is the cgroup v2 hierarchy.
func (h *Hierarchy) Unified() bool { return h.unified }

// Version is "v2" on the unified hierarchy, else "v1" (Podman's words).
func (h *Hierarchy) Version() string {
	if h.unified {
		return "v2"
	}
	return "v1"
}

// Controllers lists the controllers containers can be limited by: the
// root's cgroup.controllers on v2, the mounted hierarchies on v1.
func (h *Hierarchy) Controllers() []string {
	if h.unified {
		data, err := os.ReadFile(filepath.Join(h.root, "cgroup.controllers"))
		if err != nil {
			return []string{}
		}
		return strings.Fields(string(data))
	}
	entries, err := os.ReadDir(h.root)
	if err != nil {
		return []string{}
	}
	out := []string{}
	for _, e := range entries {
		if e.IsDir() && !strings.Contains(e.Name(), ",") {
			if _, err := os.Stat(filepath.Join(h.root, e.Name(), "tasks")); err == nil {
				out = append(out, e.Name())
			}
		}
	}
	return out
}

// HasController reports whether the host offers controller (memory, io,
// blkio, pids ...).
func (h *Hierarchy) HasController(controller string) bool {
	for _, c := range h.Controllers() {
		if c == controller {
			return true
		}
	}
	return false
}

// Dir is the directory of cgroup cg (a path like "/berth/berth-ID") in
// controller's hierarchy on v1, in the one tree on v2.
func (h *Hierarchy) Dir(controller, cg string) string {
	if h.unified {
		return filepath.Join(h.root, cg)
	}
	return filepath.Join(h.root, controller, cg)
}

// Rel is the cgroup path of dir, a directory below the root (on v1, below
// one controller's hierarchy); ok is false for a directory elsewhere.
func (h *Hierarchy) Rel(dir string) (cg string, ok bool) {
	rest, ok := strings.CutPrefix(filepath.Clean(dir), h.root+"/")
	if !ok {
		return "", false
	}
	if !h.unified {
		if _, after, found := strings.Cut(rest, "/"); found {
			return "/" + after, true
		}
		return "/", true
	}
	return "/" + rest, true
}

// SwapAccounting reports whether the kernel accounts swap per cgroup, so
// that memory+swap limits can be set: memory.memsw.* on v1; on v2
// memory.swap.max, which only non-root cgroups have (the engine's own, or
// any child of the root).
func (h *Hierarchy) SwapAccounting() bool {
	if !h.unified {
		_, err := os.Stat(filepath.Join(h.root, "memory", "memory.memsw.limit_in_bytes"))
		return err == nil
	}
	return h.childHas("memory.swap.max")
}

// IOWeights reports whether block I/O weights can be set: blkio.weight or
// blkio.bfq.weight on v1 (a CFQ or BFQ scheduler), io.weight or
// io.bfq.weight in non-root cgroups on v2.
func (h *Hierarchy) IOWeights() bool {
	if !h.unified {
		for _, f := range []string{"blkio.weight", "blkio.bfq.weight"} {
			if _, err := os.Stat(filepath.Join(h.root, "blkio", f)); err == nil {
				return true
			}
		}
		return false
	}
	return h.childHas("io.weight") || h.childHas("io.bfq.weight")
}

// childHas reports whether a non-root cgroup of the unified hierarchy (the
// engine's own, or a child of the root) has the control file.
func (h *Hierarchy) childHas(file string) bool {
	if data, err := os.ReadFile("/proc/self/cgroup"); err == nil && h.root == DefaultRoot {
		for _, line := range strings.Split(string(data), "\n") {
			if own, ok := strings.CutPrefix(line, "0::"); ok && own != "/" {
				if _, err := os.Stat(filepath.Join(h.root, own, file)); err == nil {
					return true
				}
			}
		}
	}
	entries, _ := os.ReadDir(h.root)
	for _, e := range entries {
		if e.IsDir() {
			if _, err := os.Stat(filepath.Join(h.root, e.Name(), file)); err == nil {
				return true
			}
		}
	}
	return false
}

// IOController is the controller block I/O limits need: blkio on v1, io
// on v2.
func (h *Hierarchy) IOController() string {
	if h.unified {
		return "io"
	}
	return "blkio"
}

// SetIOThrottle writes b's per-device throttles (bytes and operations per
// second, read and write) into cgroup cg: the blkio.throttle.* files on v1,
// io.max on v2 (a rate of 0 lifts that limit). runc sets them when it
// creates a container but not on update, so the engine writes them then.
func (h *Hierarchy) SetIOThrottle(cg string, b *specs.LinuxBlockIO) error {
	if b == nil {
		return nil
	}
	lists := []struct {
		v1, v2 string
		devs   []specs.LinuxThrottleDevice
	}{
		{"blkio.throttle.read_bps_device", "rbps", b.ThrottleReadBpsDevice},
		{"blkio.throttle.write_bps_device", "wbps", b.ThrottleWriteBpsDevice},
		{"blkio.throttle.read_iops_device", "riops", b.ThrottleReadIOPSDevice},
		{"blkio.throttle.write_iops_device", "wiops", b.ThrottleWriteIOPSDevice},
	}
	dir := h.Dir("blkio", cg)
	for _, l := range lists {
		for _, d := range l.devs {
			dev := strconv.FormatInt(d.Major, 10) + ":" + strconv.FormatInt(d.Minor, 10)
			file, line := filepath.Join(dir, l.v1), dev+" "+strconv.FormatUint(d.Rate, 10)
			if h.unified {
				rate := strconv.FormatUint(d.Rate, 10)
				if d.Rate == 0 {
					rate = "max"
				}
				file, line = filepath.Join(dir, "io.max"), dev+" "+l.v2+"="+rate
			}
			if err := os.WriteFile(file, []byte(line), 0o644); err != nil {
				return fmt.Errorf("cgroup %s: %s %q: %w", cg, filepath.Base(file), line, err)
			}
		}
	}
	return nil
}

// ErrNoCgroup is returned when a container's cgroup does not exist (it is
// not running).
var ErrNoCgroup = errors.New("cgroup not found")

// Procs lists the processes in cgroup cg (on v1 from the pids hierarchy,
// or memory's where pids is not mounted).
func (h *Hierarchy) Procs(cg string) ([]int, error) {
	dirs := []string{h.Dir("pids", cg)}
	if !h.unified {
		dirs = append(dirs, h.Dir("memory", cg), h.Dir("cpu", cg))
	}
	var firstErr error
	for _, d := range dirs {
		pids, err := readPids(filepath.Join(d, "cgroup.procs"))
		if err == nil {
			return pids, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if errors.Is(firstErr, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNoCgroup, cg)
	}
	return nil, firstErr
}

func readPids(path string) ([]int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out, nil
}

// Freeze freezes (or thaws) every process of cgroup cg and waits until
// the kernel says it is done: freezer.state on v1, cgroup.freeze and the
// "frozen" key of cgroup.events on v2. A freeze that is not done within
// two seconds is undone (the cgroup is thawed) before the error: never
// left half-frozen.
//
// A v1 freeze can wedge: a thread that a multi-threaded process's execve
// has told to exit is frozen before it does, and the exec, which waits for
// it without being freezable itself, keeps the cgroup FREEZING for ever
// (runc init exec'ing the container's command, a Go program's exec). The
// kernel's v1 documentation says to thaw and retry then; Freeze thaws the
// cgroup for a moment every 100 ms it stays FREEZING, which lets the exec
// finish, and freezes again.
func (h *Hierarchy) Freeze(cg string, freeze bool) error {
	file, want, check, done := "", "", "", ""
	if h.unified {
		dir := h.Dir("", cg)
		file, check = filepath.Join(dir, "cgroup.freeze"), filepath.Join(dir, "cgroup.events")
		want, done = "0", "frozen 0"
		if freeze {
			want, done = "1", "frozen 1"
		}
	} else {
		file = filepath.Join(h.Dir("freezer", cg), "freezer.state")
		check = file
		want = "THAWED"
		if freeze {
			want = "FROZEN"
		}
		done = want
	}
	start := time.Now()
	deadline, lastThaw := start.Add(2*time.Second), start
	for {
		if err := os.WriteFile(file, []byte(want), 0o644); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("%w: %s", ErrNoCgroup, cg)
			}
			return err
		}
		data, err := os.ReadFile(check)
		if err != nil {
			return err
		}
		if hasLine(data, done) {
			return nil
		}
		now := time.Now()
		if now.After(deadline) {
			if freeze {
				h.Freeze(cg, false)
			}
			return fmt.Errorf("cgroup %s: not %s within 2s (left thawed)", cg, done)
		}
		if freeze && !h.unified && now.Sub(lastThaw) >= freezeRetry {
			os.WriteFile(file, []byte("THAWED"), 0o644)
			time.Sleep(5 * time.Millisecond)
			lastThaw = time.Now()
			continue
		}
		time.Sleep(time.Millisecond)
	}
}

// freezeRetry is how long a v1 freeze may stay FREEZING before Freeze and
// SettleFreezer thaw it for a moment.
const freezeRetry = 100 * time.Millisecond

// SettleFreezer makes sure cgroup cg's v1 freezer is not stuck FREEZING
// (see Freeze): one that stays FREEZING for wait is thawed, and SettleFreezer
// answers true. A freeze in progress (Freeze, a runtime's pause) writes
// FROZEN again at once and is only delayed. runc 1.1 waits without end for
// a FREEZING cgroup to settle in every command that reads a container's
// state, so the engine settles it before running one. v2 and a missing
// cgroup are left alone.
func (h *Hierarchy) SettleFreezer(cg string, wait time.Duration) bool {
	if h.unified {
		return false
	}
	file := filepath.Join(h.Dir("freezer", cg), "freezer.state")
	for deadline := time.Now().Add(wait); ; time.Sleep(time.Millisecond) {
		data, err := os.ReadFile(file)
		if err != nil || strings.TrimSpace(string(data)) != "FREEZING" {
			return false
		}
		if time.Now().After(deadline) {
			return os.WriteFile(file, []byte("THAWED"), 0o644) == nil
		}
	}
}

// Frozen reports whether cgroup cg is frozen.
func (h *Hierarchy) Frozen(cg string) bool {
	if h.unified {
		data, err := os.ReadFile(filepath.Join(h.Dir("", cg), "cgroup.events"))
		return err == nil && hasLine(data, "frozen 1")
	}
	data, err := os.ReadFile(filepath.Join(h.Dir("freezer", cg), "freezer.state"))
	return err == nil && strings.TrimSpace(string(data)) == "FROZEN"
}

func hasLine(data []byte, line string) bool {
	for _, l := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}

// OOMKills is how many processes the kernel's OOM killer has killed in
// cgroup cg because of its memory limit: memory.events' oom_kill on v2,
// memory.oom_control's oom_kill on v1 (kernel 4.13 and later). ok is false
// when the cgroup is gone or the kernel does not count them.
func (h *Hierarchy) OOMKills(cg string) (n uint64, ok bool) {
	file := "memory.oom_control"
	if h.unified {
		file = "memory.events"
	}
	kv, err := ReadKeyValues(filepath.Join(h.Dir("memory", cg), file))
	if err != nil {
		return 0, false
	}
	n, ok = kv["oom_kill"]
	return n, ok
}

// ReadKeyValues reads the "key value" lines of a flat-keyed control file
// (memory.stat, cpu.stat, memory.events ...).
func ReadKeyValues(path string) (map[string]uint64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseKeyValues(string(data)), nil
}

// ParseKeyValues parses the "key value" lines of a flat-keyed control file
// read by other means (the stats reader's open descriptors).
func ParseKeyValues(data string) map[string]uint64 { return parseKeyValues(data) }

// parseKeyValues parses the "key value" lines of a flat-keyed control file.
func parseKeyValues(data string) map[string]uint64 {
	out := map[string]uint64{}
	sc := bufio.NewScanner(strings.NewReader(data))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 2 {
			continue
		}
		if v, err := strconv.ParseUint(fields[1], 10, 64); err == nil {
			out[fields[0]] = v
		}
	}
	return out
}

// DefaultPlacement fills in what an engine left unset of where its
// containers and pods go: the manager (cgroupfs) and the parent, "/berth"
// under cgroupfs and DefaultSlice under systemd.
func DefaultPlacement(manager, parent string) (string, string) {
	if manager == "" {
		manager = ManagerCgroupfs
	}
	if parent == "" {
		parent = "/berth"
		if manager == ManagerSystemd {
			parent = DefaultSlice
		}
	}
	return manager, parent
}
