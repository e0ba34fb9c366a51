package hostsuite

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/engine"
	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/poll"
)

// systemdBooted reports whether systemd runs as PID 1 (sd_booted).
func systemdBooted() bool {
	fi, err := os.Lstat("/run/systemd/system")
	return err == nil && fi.IsDir()
}

// defaultManager is the cgroup manager an engine picks when told none:
// systemd where systemd runs on the unified hierarchy, as Podman.
func defaultManager() string {
	if systemdBooted() && unified() {
		return "systemd"
	}
	return "cgroupfs"
}

// managers are the cgroup managers this host can run: cgroupfs always,
// systemd where systemd is PID 1.
func managers() []string {
	if systemdBooted() {
		return []string{"cgroupfs", "systemd"}
	}
	return []string{"cgroupfs"}
}

// labWith is an engine using cgroup manager: the shared one where that is
// its default, else an engine of the test's own.
func labWith(t *testing.T, manager string) *lab {
	if manager == defaultManager() {
		return startLab(t)
	}
	o := labOptions()
	o.Config = func(_ *enginetest.Engine, cfg *engine.Config) { cfg.CgroupManager = manager }
	return &lab{enginetest.Start(t, o)}
}

// unitState is systemctl is-active's answer for unit.
func unitState(t testing.TB, unit string) string {
	t.Helper()
	out, _ := systemctl(t, "is-active", unit)
	return out
}

// cgroupGone reports whether cgroup cg no longer exists in any hierarchy.
func cgroupGone(cg string) bool {
	if unified() {
		_, err := os.Stat(filepath.Join("/sys/fs/cgroup", cg))
		return os.IsNotExist(err)
	}
	matches, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", cg))
	return len(matches) == 0
}

// TestCgroupManagers: under each cgroup manager the host can run, a
// container's limits, stats, top, update, pause and a pod's limits work on
// the cgroup the manager placed, info and inspect name the manager, a
// cgroup parent of the wrong form is a 400 that creates nothing, and
// removal leaves no cgroup (no scope, no slice) behind.
func TestCgroupManagers(t *testing.T) {
	for _, manager := range managers() {
		t.Run(manager, func(t *testing.T) {
			l := labWith(t, manager)
			var info struct {
				Host struct{ CgroupManager string } `json:"host"`
			}
			l.Get("/info", &info)
			if info.Host.CgroupManager != manager {
				t.Fatalf("info cgroupManager %q, want %q", info.Host.CgroupManager, manager)
			}
			id := l.Run(map[string]any{"command": []string{"sleep", "600"},
				"resource_limits": map[string]any{"memory": map[string]any{"limit": 64 << 20}}})
			var d struct {
				State struct {
					CgroupPath string
					ConmonPid  int
				}
				HostConfig struct {
					CgroupManager string
					CgroupParent  string
				}
			}
			l.Get("/containers/"+id+"/json", &d)
			cg := d.State.CgroupPath
			want := "/berth/berth-" + id
			if manager == "systemd" {
				want = "/berth.slice/berth-" + id + ".scope"
			}
			if cg != want || d.HostConfig.CgroupManager != manager {
				t.Fatalf("cgroup %q (manager %q), want %q under %s", cg, d.HostConfig.CgroupManager, want, manager)
			}
			var s containerStats
			poll.Until(t, 10*time.Second, "stats with the limit and one process", func() bool {
				s = l.stats(id)
				return s.MemLimit == 64<<20 && s.PIDs == 1
			})
			// Started means runc init was told to exec the process: for a
			// moment after, top may see it between runc init and sleep
			// ("[sleep]": no command line yet, seen once in CI).
			var top struct{ Processes [][]string }
			if !poll.Within(10*time.Second, func() bool {
				l.Get("/containers/"+id+"/top?ps_args=args", &top)
				return len(top.Processes) == 1 && strings.Contains(strings.Join(top.Processes[0], " "), "sleep 600")
			}) {
				t.Fatalf("top: %v", top.Processes)
			}
			l.Must(http.StatusCreated, "POST", "/containers/"+id+"/update", map[string]any{"memory": map[string]any{"limit": 96 << 20}})
			if got := readCgroup(t, cg, "memory", "memory.limit_in_bytes", "memory.max"); got != strconv.Itoa(96<<20) {
				t.Fatalf("memory limit after update: %s", got)
			}
			l.Must(http.StatusNoContent, "POST", "/containers/"+id+"/pause", nil)
			if !l.inspect(id).State.Paused {
				t.Fatal("not paused")
			}
			l.Must(http.StatusNoContent, "POST", "/containers/"+id+"/unpause", nil)
			conmonCg, _ := os.ReadFile("/proc/" + strconv.Itoa(d.State.ConmonPid) + "/cgroup")
			if manager == "systemd" {
				if got := unitState(t, "berth-"+id+".scope"); got != "active" {
					t.Fatalf("the container's scope is %q", got)
				}
				if !strings.Contains(string(conmonCg), "/berth.slice/berth-conmon-"+id+".scope") {
					t.Fatalf("conmon is not in its scope: %s", conmonCg)
				}
			}

			// A cgroup parent of the other manager's form: 400, nothing created.
			bad, good := "berthtest.slice", "/berthtest"
			if manager == "systemd" {
				bad, good = "/berthtest", "berthtest.slice"
			}
			before := l.ContainerCount()
			status, body := l.Do("POST", "/containers/create", map[string]any{"image": "localhost/busybox:latest", "cgroup_parent": bad})
			if status != http.StatusBadRequest || !bytes.Contains(body, []byte("cgroup_parent")) {
				t.Fatalf("cgroup parent %q: %d %s", bad, status, body)
			}
			status, body = l.Do("POST", "/containers/create", map[string]any{"image": "localhost/busybox:latest", "cgroups_mode": "disabled"})
			if status != http.StatusBadRequest || !bytes.Contains(body, []byte("cgroups_mode")) {
				t.Fatalf("cgroups disabled: %d %s", status, body)
			}
			if after := l.ContainerCount(); after != before {
				t.Fatalf("%d containers after refused creates, %d before", after, before)
			}
			own := l.Run(map[string]any{"command": []string{"sleep", "600"}, "cgroup_parent": good, "cgroups_mode": "no-conmon"})
			od := l.inspect(own)
			ownCg := od.State.CgroupPath
			if want := "/berthtest/berth-" + own; manager == "cgroupfs" && ownCg != want {
				t.Fatalf("cgroup under parent %s: %q", good, ownCg)
			}
			if want := "/berthtest.slice/berth-" + own + ".scope"; manager == "systemd" && ownCg != want {
				t.Fatalf("cgroup under parent %s: %q", good, ownCg)
			}
			poll.Until(t, 10*time.Second, "stats under parent "+good, func() bool { return l.stats(own).PIDs == 1 })

			// A pod: its limits on its own cgroup (a slice under systemd).
			var pod struct {
				ID string `json:"Id"`
			}
			l.Decode(l.Must(http.StatusCreated, "POST", "/pods/create", map[string]any{"name": "mgr-" + manager,
				"resource_limits": map[string]any{"cpu": map[string]any{"quota": 50000, "period": 100000}, "memory": map[string]any{"limit": 80 << 20}}}), &pod)
			member := l.Create(map[string]any{"pod": pod.ID, "command": []string{"sleep", "600"}})
			l.Must(http.StatusOK, "POST", "/pods/"+pod.ID+"/start", nil)
			var pinfo struct{ CgroupPath string }
			l.Get("/pods/"+pod.ID+"/json", &pinfo)
			if manager == "systemd" && pinfo.CgroupPath != "/berth.slice/berth-berth_pod_"+pod.ID+".slice" {
				t.Fatalf("pod cgroup %q", pinfo.CgroupPath)
			}
			if got := readCgroup(t, pinfo.CgroupPath, "memory", "memory.limit_in_bytes", "memory.max"); got != strconv.Itoa(80<<20) {
				t.Errorf("pod memory limit %s", got)
			}
			if unified() {
				if got := readCgroup(t, pinfo.CgroupPath, "cpu", "", "cpu.max"); got != "50000 100000" {
					t.Errorf("pod cpu.max %q", got)
				}
			}
			mcg := l.inspect(member).State.CgroupPath
			if !strings.HasPrefix(mcg, pinfo.CgroupPath+"/") {
				t.Fatalf("member cgroup %s is not under the pod's %s", mcg, pinfo.CgroupPath)
			}
			poll.Until(t, 10*time.Second, "member stats", func() bool { return l.stats(member).PIDs == 1 })

			// Removal leaves nothing behind.
			l.Must(http.StatusOK, "DELETE", "/pods/"+pod.ID+"?force=true&timeout=0", nil)
			for _, c := range []string{id, own} {
				l.Must(http.StatusOK, "DELETE", "/containers/"+c+"?force=true&timeout=0", nil)
			}
			for _, c := range []string{cg, ownCg, mcg, pinfo.CgroupPath} {
				poll.Until(t, 10*time.Second, "cgroup "+c+" removed", func() bool { return cgroupGone(c) })
			}
			if manager == "systemd" {
				for _, u := range []string{"berth-" + id + ".scope", "berth-conmon-" + id + ".scope", "berth-" + own + ".scope", "berth-berth_pod_" + pod.ID + ".slice"} {
					if got := unitState(t, u); got == "active" {
						t.Errorf("unit %s is still %s", u, got)
					}
				}
			}
		})
	}
}

// TestSystemdManagerNeedsSystemd: asking for the systemd manager where
// systemd does not run, or for a manager that does not exist, stops the
// engine at start with the option named.
func TestSystemdManagerNeedsSystemd(t *testing.T) {
	enginetest.RequireRuntime(t, "host suite tests")
	cases := map[string]string{"cgroupv3": "unknown cgroup manager"}
	if !systemdBooted() {
		cases["systemd"] = "PID 1"
	}
	for value, reason := range cases {
		dir := t.TempDir()
		_, err := engine.New(context.Background(), nil, engine.Config{Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, "run"), Runtime: "runc", CgroupManager: value})
		if err == nil || !strings.Contains(err.Error(), "--cgroup-manager") || !strings.Contains(err.Error(), reason) {
			t.Fatalf("--cgroup-manager %s: %v", value, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "root")); !os.IsNotExist(err) {
			t.Fatalf("--cgroup-manager %s created the root: %v", value, err)
		}
	}
}

// TestCgroupsSplit: --cgroups split puts the container and its conmon in
// sub-cgroups of the engine's own cgroup (the engine's processes move to a
// leaf of it first, as Podman moves itself); limits, stats and removal work
// there. It needs the unified hierarchy: on v1 it is a 400 naming
// cgroups_mode. With a cgroup parent it is a 400 too (as Podman).
func TestCgroupsSplit(t *testing.T) {
	l := startLab(t)
	status, body := l.Do("POST", "/containers/create", map[string]any{"image": "localhost/busybox:latest", "cgroups_mode": "split", "cgroup_parent": "/x"})
	if status != http.StatusBadRequest || !bytes.Contains(body, []byte("cgroups_mode")) {
		t.Fatalf("split with a cgroup parent: %d %s", status, body)
	}
	spec := map[string]any{"image": "localhost/busybox:latest", "cgroups_mode": "split", "command": []string{"sleep", "600"},
		"resource_limits": map[string]any{"memory": map[string]any{"limit": 48 << 20}}}
	if !unified() {
		status, body := l.Do("POST", "/containers/create", spec)
		if status != http.StatusBadRequest || !bytes.Contains(body, []byte("cgroups_mode")) || !bytes.Contains(body, []byte("unified")) {
			t.Fatalf("split on v1: %d %s", status, body)
		}
		return
	}
	id := l.Run(spec)
	var d struct {
		State struct {
			CgroupPath string
			ConmonPid  int
		}
	}
	l.Get("/containers/"+id+"/json", &d)
	cg := d.State.CgroupPath
	own, _ := os.ReadFile("/proc/self/cgroup")
	engineLeaf := strings.TrimSpace(strings.TrimPrefix(string(own), "0::"))
	parent := filepath.Dir(cg)
	if filepath.Base(cg) != "berth-"+id || engineLeaf != parent+"/berth-engine" {
		t.Fatalf("split cgroup %s; the engine now in %s", cg, engineLeaf)
	}
	conmonCg, _ := os.ReadFile("/proc/" + strconv.Itoa(d.State.ConmonPid) + "/cgroup")
	if strings.TrimSpace(string(conmonCg)) != "0::"+parent+"/berth-conmon-"+id {
		t.Fatalf("conmon of the split container is in %s", conmonCg)
	}
	poll.Until(t, 10*time.Second, "stats of the split container", func() bool {
		s := l.stats(id)
		return s.PIDs == 1 && s.MemLimit == 48<<20
	})
	l.Must(http.StatusOK, "DELETE", "/containers/"+id+"?force=true&timeout=0", nil)
	for _, c := range []string{cg, parent + "/berth-conmon-" + id} {
		poll.Until(t, 10*time.Second, "cgroup "+c+" removed", func() bool { return cgroupGone(c) })
	}
}
