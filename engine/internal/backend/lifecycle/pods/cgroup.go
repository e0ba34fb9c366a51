package pods

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/backend/execution/cgroups"
	"github.com/berth-project/berth/engine/internal/core"
)

// cgroupWrite is one value written to a control file of a pod's cgroup.
type cgroupWrite struct {
	// controller is the cgroup v1 hierarchy ("cpu", "memory" ...); on the
	// unified hierarchy it names the controller to enable in the parents.
	controller string
	file       string
	value      string
	// field is the request member the value comes from (for a 400).
	field string
}

// limitWrites maps a pod's limits onto control files, in the order they
// must be written (the period before the quota, the memory limit before
// memory+swap), for cgroup v1 or the unified hierarchy (v2).
func limitWrites(r *specs.LinuxResources, unified bool) []cgroupWrite {
	if r == nil {
		return nil
	}
	var out []cgroupWrite
	add := func(controller, file, value, field string) {
		out = append(out, cgroupWrite{controller: controller, file: file, value: value, field: field})
	}
	if c := r.CPU; c != nil {
		if c.Cpus != "" {
			add("cpuset", "cpuset.cpus", c.Cpus, "resource_limits.cpu.cpus")
		}
		if c.Mems != "" {
			add("cpuset", "cpuset.mems", c.Mems, "resource_limits.cpu.mems")
		}
		if c.Shares != nil {
			if unified {
				// runc's mapping of shares (2..262144) onto weight (1..10000).
				add("cpu", "cpu.weight", strconv.FormatUint(1+((*c.Shares-2)*9999)/262142, 10), "resource_limits.cpu.shares")
			} else {
				add("cpu", "cpu.shares", strconv.FormatUint(*c.Shares, 10), "resource_limits.cpu.shares")
			}
		}
		switch {
		case unified && (c.Period != nil || c.Quota != nil):
			quota, period := "max", uint64(100000)
			if c.Quota != nil && *c.Quota > 0 {
				quota = strconv.FormatInt(*c.Quota, 10)
			}
			if c.Period != nil {
				period = *c.Period
			}
			add("cpu", "cpu.max", quota+" "+strconv.FormatUint(period, 10), "resource_limits.cpu.quota")
		case !unified:
			if c.Period != nil {
				add("cpu", "cpu.cfs_period_us", strconv.FormatUint(*c.Period, 10), "resource_limits.cpu.period")
			}
			if c.Quota != nil {
				add("cpu", "cpu.cfs_quota_us", strconv.FormatInt(*c.Quota, 10), "resource_limits.cpu.quota")
			}
		}
	}
	if m := r.Memory; m != nil && m.Limit != nil {
		limit := strconv.FormatInt(*m.Limit, 10)
		if unified {
			add("memory", "memory.max", limit, "resource_limits.memory.limit")
		} else {
			add("memory", "memory.limit_in_bytes", limit, "resource_limits.memory.limit")
		}
		if m.Swap != nil {
			switch {
			case unified && *m.Swap == -1:
				add("memory", "memory.swap.max", "max", "resource_limits.memory.swap")
			case unified:
				add("memory", "memory.swap.max", strconv.FormatInt(*m.Swap-*m.Limit, 10), "resource_limits.memory.swap")
			default:
				add("memory", "memory.memsw.limit_in_bytes", strconv.FormatInt(*m.Swap, 10), "resource_limits.memory.swap")
			}
		}
	}
	if p := r.Pids; p != nil && p.Limit != nil {
		v := "max"
		if *p.Limit > 0 {
			v = strconv.FormatInt(*p.Limit, 10)
		}
		add("pids", "pids.max", v, "resource_limits.pids.limit")
	}
	return out
}

// unifiedCgroups reports whether root is a cgroup v2 (unified) mount, as
// the engine's cgroups seam found it.
func unifiedCgroups(root string) bool {
	return cgroups.At(root).Unified()
}

// createCgroup creates a pod's cgroup rel (relative to each hierarchy's
// root) and writes its limits. It is idempotent: existing directories are
// kept and the same values written again. A value the kernel refuses
// (CPUs or nodes that do not exist, a swap limit without swap accounting)
// is a 400 naming its field.
func (m *Manager) createCgroup(rel string, r *specs.LinuxResources) error {
	root := m.o.CgroupRoot
	unified := unifiedCgroups(root)
	writes := limitWrites(r, unified)
	if len(writes) == 0 {
		return nil
	}
	if unified {
		var controllers []string
		for _, w := range writes {
			if !slices.Contains(controllers, "+"+w.controller) {
				controllers = append(controllers, "+"+w.controller)
			}
		}
		if err := enableUnified(root, rel, strings.Join(controllers, " ")); err != nil {
			return err
		}
	}
	for _, w := range writes {
		dir := filepath.Join(root, rel)
		if !unified {
			dir = filepath.Join(root, w.controller, rel)
			if err := mkdirCgroup(filepath.Join(root, w.controller), rel, w.controller == "cpuset"); err != nil {
				return err
			}
		}
		if err := os.WriteFile(filepath.Join(dir, w.file), []byte(w.value), 0o644); err != nil {
			if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ERANGE) || errors.Is(err, os.ErrNotExist) {
				return core.InvalidArgument(w.field, fmt.Errorf("the kernel refuses %s=%s for the pod's cgroup: %w", w.file, w.value, err))
			}
			return fmt.Errorf("pod cgroup %s: %w", dir, err)
		}
	}
	return nil
}

// mkdirCgroup creates rel under a v1 hierarchy, level by level; in the
// cpuset hierarchy each new level first takes its parent's CPUs and memory
// nodes, without which no task could join it.
func mkdirCgroup(hierarchy, rel string, cpuset bool) error {
	dir := hierarchy
	for _, part := range strings.Split(strings.Trim(rel, "/"), "/") {
		parent := dir
		dir = filepath.Join(dir, part)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("pod cgroup: %w", err)
		}
		if !cpuset {
			continue
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			cur, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				return fmt.Errorf("pod cgroup: %w", err)
			}
			if strings.TrimSpace(string(cur)) != "" {
				continue
			}
			from, err := os.ReadFile(filepath.Join(parent, f))
			if err != nil {
				return fmt.Errorf("pod cgroup: %w", err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), from, 0o644); err != nil {
				return fmt.Errorf("pod cgroup %s: %w", filepath.Join(dir, f), err)
			}
		}
	}
	return nil
}

// enableUnified creates rel on the unified hierarchy and enables the
// controllers in every level above it.
func enableUnified(root, rel, controllers string) error {
	dir := root
	for _, part := range strings.Split(strings.Trim(rel, "/"), "/") {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(controllers), 0o644); err != nil {
			return fmt.Errorf("pod cgroup: enabling %s in %s: %w", controllers, dir, err)
		}
		dir = filepath.Join(dir, part)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("pod cgroup: %w", err)
		}
	}
	return nil
}

// cgroupDirs lists the directories of cgroup rel: one on the unified
// hierarchy, one per v1 hierarchy.
func (m *Manager) cgroupDirs(rel string) []string {
	root := m.o.CgroupRoot
	if unifiedCgroups(root) {
		return []string{filepath.Join(root, rel)}
	}
	entries, _ := os.ReadDir(root)
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, filepath.Join(root, e.Name(), rel))
		}
	}
	return out
}

// removeCgroup removes the pod's cgroup from every hierarchy. Its members'
// cgroups are gone by now; the kernel may need a moment to release them.
func (m *Manager) removeCgroup(rel string) {
	deadline := time.Now().Add(2 * time.Second)
	for _, p := range m.cgroupDirs(rel) {
		for {
			err := os.Remove(p)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				m.logger.Warn("removing pod cgroup", "path", p, "err", err)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// The engine notes a pod's cgroup in its run directory before creating it
// and drops the note once the pod is recorded, so that Open can remove the
// cgroup of a pod whose creation a crash interrupted (other engines may
// share the parent cgroup: only noted cgroups are removed).
func (m *Manager) cgroupNote(podID string) string {
	return filepath.Join(m.o.StateDir, "pod-cgroups", podID)
}

func (m *Manager) noteCgroup(podID, rel string) error {
	if err := os.MkdirAll(filepath.Dir(m.cgroupNote(podID)), 0o700); err != nil {
		return err
	}
	return os.WriteFile(m.cgroupNote(podID), []byte(rel), 0o600)
}

func (m *Manager) dropCgroupNote(podID string) {
	if err := os.Remove(m.cgroupNote(podID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		m.logger.Warn("removing pod cgroup note", "pod", podID, "err", err)
	}
}

// settleCgroups removes the cgroups of pods that were never recorded and
// writes the limits of recorded pods again (a reboot empties the cgroup
// hierarchies; their members' cgroups are then created under the pod's).
func (m *Manager) settleCgroups() {
	notes, _ := os.ReadDir(filepath.Dir(m.cgroupNote("x")))
	for _, n := range notes {
		if _, recorded := m.byID[n.Name()]; !recorded {
			note, err := os.ReadFile(m.cgroupNote(n.Name()))
			switch {
			case err != nil:
			case strings.HasSuffix(string(note), ".slice") && cgroups.CheckSlice(string(note)) == nil:
				m.logger.Warn("stopping the slice of a pod that was never recorded", "pod", n.Name(), "slice", string(note))
				if err := cgroups.StopUnit(context.Background(), string(note)); err != nil {
					m.logger.Warn("stopping a pod's slice", "slice", string(note), "err", err)
				}
			case filepath.IsAbs(string(note)):
				m.logger.Warn("removing the cgroup of a pod that was never recorded", "pod", n.Name(), "cgroup", string(note))
				m.removeCgroup(string(note))
			}
		}
		m.dropCgroupNote(n.Name())
	}
	for _, e := range m.byID {
		// A slice is started again after a reboot (systemd forgets
		// transient units); a cgroupfs cgroup is written only for limits.
		if e.rec.CgroupPath == "" || (e.rec.Spec.ResourceLimits == nil && e.rec.CgroupSlice == "") {
			continue
		}
		if err := m.makePodCgroup(context.Background(), e.rec); err != nil {
			m.logger.Warn("writing the limits of a pod's cgroup", "pod", e.rec.ID, "err", err)
		}
	}
}

// checkCgroupParent validates a pod's cgroup parent for the engine's
// manager: a slice name under systemd, a clean absolute path under
// cgroupfs.
func (m *Manager) checkCgroupParent(parent string) error {
	if parent == "" {
		return nil
	}
	if m.o.CgroupManager == cgroups.ManagerSystemd {
		if err := cgroups.CheckSlice(parent); err != nil {
			return core.InvalidArgument("cgroup_parent", fmt.Errorf("with the systemd cgroup manager the parent must be a slice name (x.slice): %w", err))
		}
		return nil
	}
	if !path.IsAbs(parent) || path.Clean(parent) != parent || parent == "/" {
		return core.InvalidArgument("cgroup_parent", fmt.Errorf("%q is not a clean absolute cgroup path (the cgroupfs manager)", parent))
	}
	return nil
}

// placeCgroup names the pod's own cgroup: PARENT/berth-pod-ID under
// cgroupfs; under systemd a slice below the parent slice
// (berth-berth_pod_ID.slice), whose directory is its CgroupPath.
func (m *Manager) placeCgroup(pod *core.Pod) error {
	if m.o.CgroupManager != cgroups.ManagerSystemd {
		pod.CgroupPath = filepath.Join(pod.CgroupParent, "berth-pod-"+pod.ID)
		return nil
	}
	slice := cgroups.PodSlice(pod.CgroupParent, pod.ID)
	dir, err := cgroups.SliceDir(slice)
	if err != nil {
		return core.InvalidArgument("cgroup_parent", err)
	}
	pod.CgroupSlice, pod.CgroupPath = slice, dir
	return nil
}

// podMembersParent is what members are created under: the pod's slice
// under systemd, its cgroup path under cgroupfs ("": their own).
func podMembersParent(pod core.Pod) string {
	if pod.CgroupSlice != "" {
		return pod.CgroupSlice
	}
	return pod.CgroupPath
}

// podCgroupNote is what the crash note of a pod's cgroup holds: the slice
// or the cgroupfs path.
func podCgroupNote(pod core.Pod) string { return podMembersParent(pod) }

// makePodCgroup creates the pod's cgroup with its limits: a transient
// slice through systemd (which keeps the limits as unit properties), or
// the cgroupfs directories written directly.
func (m *Manager) makePodCgroup(ctx context.Context, pod core.Pod) error {
	if pod.CgroupSlice == "" {
		return m.createCgroup(pod.CgroupPath, pod.Spec.ResourceLimits)
	}
	if err := cgroups.StartSlice(ctx, pod.CgroupSlice, pod.Spec.ResourceLimits); err != nil {
		var field string
		if f, _, ok := strings.Cut(err.Error(), ":"); ok && strings.HasPrefix(f, "resource_limits.") {
			field = f
		}
		if field != "" {
			return core.InvalidArgument(field, err)
		}
		return fmt.Errorf("pod %s: %w", pod.ID, err)
	}
	return nil
}

// dropPodCgroup removes the pod's cgroup: stops its slice, or removes the
// cgroupfs directories.
func (m *Manager) dropPodCgroup(pod core.Pod) {
	if pod.CgroupSlice == "" {
		m.removeCgroup(pod.CgroupPath)
		return
	}
	if err := cgroups.StopUnit(context.Background(), pod.CgroupSlice); err != nil {
		m.logger.Warn("stopping a pod's slice", "pod", pod.ID, "slice", pod.CgroupSlice, "err", err)
	}
}
