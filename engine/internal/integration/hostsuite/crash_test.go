package hostsuite

import (
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/poll"
)

// TestContainersSurviveEngineKill: a container keeps running while its
// engine is killed with SIGKILL; the restarted engine adopts it, reads its
// cgroup (stats, update) and removes it without leaving its cgroup behind.
// A container that exits while no engine watches is recorded as exited.
// It runs under each cgroup manager the host can run: under systemd the
// dead container's scope is stopped at the restart and the live one's kept.
func TestContainersSurviveEngineKill(t *testing.T) {
	for _, manager := range managers() {
		t.Run(manager, func(t *testing.T) { survivesKill(t, manager) })
	}
}

func survivesKill(t *testing.T, manager string) {
	p := startEngineProcess(t, "--cgroup-manager", manager)
	l := &lab{p.Engine}
	long := l.Run(map[string]any{"name": "long", "command": []string{"sleep", "900"},
		"resource_limits": map[string]any{"memory": map[string]any{"limit": 64 << 20}}})
	short := l.Run(map[string]any{"name": "short", "command": []string{"sleep", "2"}})
	// hog outgrows its limit once /go appears, after the restart: the
	// adopted container's OOM kill is recorded (under systemd its scope is
	// gone by the time the exit is handled).
	hog := l.Run(map[string]any{"name": "hog", "command": []string{"sh", "-c", "while [ ! -e /go ]; do sleep 0.1; done; x=0123456789abcdef; while true; do x=$x$x; done"},
		"resource_limits": map[string]any{"memory": map[string]any{"limit": 32 << 20, "swap": 32 << 20}}})
	cg, shortCg := l.inspect(long).State.CgroupPath, l.inspect(short).State.CgroupPath

	p.Kill9()
	time.Sleep(3 * time.Second) // short exits while no engine watches
	p.Start()

	if err := os.WriteFile(l.rootfsFile(hog, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := l.Wait(hog); code != 137 {
		t.Fatalf("the adopted hog exited %d", code)
	}
	if d := l.inspect(hog); !d.State.OOMKilled {
		t.Fatalf("the adopted hog's OOM kill is not recorded: %+v", d.State)
	}
	if d := l.inspect(long); !d.State.Running {
		t.Fatalf("long after the restart: %+v", d.State)
	}
	poll.Until(t, 10*time.Second, "short recorded as exited", func() bool {
		d := l.inspect(short)
		return d.State.Status == "exited" && d.State.ExitCode == 0
	})
	poll.Until(t, 10*time.Second, "the dead container's cgroup "+shortCg+" removed", func() bool { return cgroupGone(shortCg) })
	if manager == "systemd" {
		if got := unitState(t, "berth-"+l.inspect(short).ID+".scope"); got == "active" {
			t.Fatalf("the dead container's scope is %s", got)
		}
		if got := unitState(t, "berth-"+l.inspect(long).ID+".scope"); got != "active" {
			t.Fatalf("the adopted container's scope is %q", got)
		}
	}
	if s := l.stats(long); s.MemLimit != 64<<20 || s.PIDs != 1 {
		t.Fatalf("stats of the adopted container: %+v", s)
	}
	l.Must(http.StatusCreated, "POST", "/containers/long/update", map[string]any{"memory": map[string]any{"limit": 96 << 20}})
	if got := readCgroup(t, cg, "memory", "memory.limit_in_bytes", "memory.max"); got != strconv.Itoa(96<<20) {
		t.Fatalf("memory limit after update: %s", got)
	}
	l.Must(http.StatusOK, "DELETE", "/containers/long?force=true&timeout=0", nil)
	if _, err := os.Stat(cgroupFile(cg, "memory", "", "")); !os.IsNotExist(err) {
		t.Fatalf("the removed container's cgroup %s is still there: %v", cg, err)
	}
}
