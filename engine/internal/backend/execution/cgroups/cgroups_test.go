package cgroups

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// fakeRoot lays files out below a temporary root (path -> content).
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestUnifiedLayout: a root with cgroup.controllers is the unified
// hierarchy; paths, processes and OOM kills come from the one tree.
func TestUnifiedLayout(t *testing.T) {
	root := fakeRoot(t, map[string]string{
		"cgroup.controllers":             "cpuset cpu io memory pids\n",
		"berth/berth-1/cgroup.procs":     "12\n34\n",
		"berth/berth-1/memory.events":    "low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\noom_group_kill 0\n",
		"berth/berth-2/memory.events":    "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n",
		"berth/berth-1/cgroup.events":    "populated 1\nfrozen 1\n",
		"berth/berth-2/cgroup.events":    "populated 1\nfrozen 0\n",
		"berth/berth-1/memory.max":       "max\n",
		"berth/berth-1/cgroup.freeze":    "1\n",
		"berth/berth-2/cgroup.freeze":    "0\n",
		"berth/berth-2/cgroup.procs":     "",
		"berth/berth-3/pids.current":     "0\n",
		"berth/berth-3/cgroup.procs.bak": "",
	})
	h := At(root)
	if !h.Unified() || h.Version() != "v2" || At(root) != h {
		t.Fatalf("unified %v version %s", h.Unified(), h.Version())
	}
	if got := h.Controllers(); !slices.Equal(got, []string{"cpuset", "cpu", "io", "memory", "pids"}) || !h.HasController("io") || h.HasController("blkio") {
		t.Fatalf("controllers %v", got)
	}
	if got := h.Dir("memory", "/berth/berth-1"); got != filepath.Join(root, "berth/berth-1") {
		t.Fatalf("dir %s", got)
	}
	if cg, ok := h.Rel(filepath.Join(root, "berth/berth-1")); !ok || cg != "/berth/berth-1" {
		t.Fatalf("rel %q %v", cg, ok)
	}
	if _, ok := h.Rel("/elsewhere/berth-1"); ok {
		t.Fatal("a directory outside the root has a cgroup path")
	}
	if pids, err := h.Procs("/berth/berth-1"); err != nil || !slices.Equal(pids, []int{12, 34}) {
		t.Fatalf("procs %v %v", pids, err)
	}
	if _, err := h.Procs("/berth/nosuch"); !errors.Is(err, ErrNoCgroup) {
		t.Fatalf("procs of a missing cgroup: %v", err)
	}
	if n, ok := h.OOMKills("/berth/berth-1"); !ok || n != 1 {
		t.Fatalf("oom kills %d %v", n, ok)
	}
	if n, ok := h.OOMKills("/berth/berth-2"); !ok || n != 0 {
		t.Fatalf("oom kills of a calm cgroup %d %v", n, ok)
	}
	if _, ok := h.OOMKills("/berth/nosuch"); ok {
		t.Fatal("oom kills of a missing cgroup")
	}
	if !h.Frozen("/berth/berth-1") || h.Frozen("/berth/berth-2") {
		t.Fatal("frozen")
	}
	// The fake kernel never moves cgroup.events: Freeze writes and then
	// waits for what is already there.
	if err := h.Freeze("/berth/berth-1", true); err != nil {
		t.Fatal(err)
	}
	if err := h.Freeze("/berth/nosuch", true); !errors.Is(err, ErrNoCgroup) {
		t.Fatalf("freeze of a missing cgroup: %v", err)
	}
}

// TestV1Layout: without cgroup.controllers each controller is a hierarchy
// of its own.
func TestV1Layout(t *testing.T) {
	root := fakeRoot(t, map[string]string{
		"memory/tasks":                            "",
		"pids/tasks":                              "",
		"cpu,cpuacct/tasks":                       "",
		"freezer/tasks":                           "",
		"memory/berth/berth-1/cgroup.procs":       "5\n",
		"memory/berth/berth-1/memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
		"freezer/berth/berth-1/freezer.state":     "FROZEN\n",
	})
	h := At(root)
	if h.Unified() || h.Version() != "v1" {
		t.Fatal("a v1 layout taken for v2")
	}
	if got := h.Controllers(); !slices.Equal(got, []string{"freezer", "memory", "pids"}) {
		t.Fatalf("controllers %v", got)
	}
	if got := h.Dir("memory", "/berth/berth-1"); got != filepath.Join(root, "memory/berth/berth-1") {
		t.Fatalf("dir %s", got)
	}
	if cg, ok := h.Rel(filepath.Join(root, "freezer/berth/berth-1")); !ok || cg != "/berth/berth-1" {
		t.Fatalf("rel %q %v", cg, ok)
	}
	// No pids directory for this cgroup: memory's cgroup.procs answers.
	if pids, err := h.Procs("/berth/berth-1"); err != nil || !slices.Equal(pids, []int{5}) {
		t.Fatalf("procs %v %v", pids, err)
	}
	if n, ok := h.OOMKills("/berth/berth-1"); !ok || n != 2 {
		t.Fatalf("oom kills %d %v", n, ok)
	}
	if !h.Frozen("/berth/berth-1") {
		t.Fatal("frozen")
	}
}

// TestDefaultPlacement: cgroupfs and "/berth" when nothing is set, the
// systemd slice under systemd, and what is set is kept.
func TestDefaultPlacement(t *testing.T) {
	for _, c := range []struct{ manager, parent, wantManager, wantParent string }{
		{"", "", ManagerCgroupfs, "/berth"},
		{ManagerSystemd, "", ManagerSystemd, DefaultSlice},
		{ManagerCgroupfs, "/custom", ManagerCgroupfs, "/custom"},
		{ManagerSystemd, "my.slice", ManagerSystemd, "my.slice"},
	} {
		m, p := DefaultPlacement(c.manager, c.parent)
		if m != c.wantManager || p != c.wantParent {
			t.Errorf("DefaultPlacement(%q, %q) = %q, %q; want %q, %q", c.manager, c.parent, m, p, c.wantManager, c.wantParent)
		}
	}
}
