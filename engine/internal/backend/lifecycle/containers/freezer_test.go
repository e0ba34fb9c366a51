package containers_test

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/execution/cgroups"
	"github.com/berth-project/berth/engine/internal/testsupport/freezertest"
)

// TestEngineStartsPastAWedgedFreezer: the chaos loop's engine would not
// start again after a kill -9 that cut a pause. On a cgroup v1 freezer a
// freeze that meets a multi-threaded process's execve (runc init starting
// the container's command) stays FREEZING for ever, and runc 1.1 waits
// without end for such a cgroup in every command that reads the container's
// state: the killed engine's runc pause spun on, and the new engine's runc
// state at reconcile did too, so it never answered. Here a container gets
// an exec loop in its cgroup, the engine is killed, the freezer is wedged
// and an orphaned "runc pause" left spinning on it, as the chaos loop found
// them. The engine must start, kill the orphan, thaw the container and find
// it running, and pause and unpause it (through the exec loop) afterwards.
func TestEngineStartsPastAWedgedFreezer(t *testing.T) {
	h := cgroups.Host()
	if h.Unified() || !h.HasController("freezer") {
		t.Skip("the wedge is cgroup v1's freezer")
	}
	p, te := startEngineProcess(t)
	te.loadBusybox()
	id := te.create(map[string]any{"name": "wedged", "command": []string{"sleep", "600"}, "stop_timeout": 0})
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)

	stateRoot := filepath.Join(p.RunRoot, "runc")
	data, err := os.ReadFile(filepath.Join(stateRoot, id, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		CgroupPaths map[string]string `json:"cgroup_paths"`
	}
	if err := json.Unmarshal(data, &st); err != nil || st.CgroupPaths["freezer"] == "" {
		t.Fatalf("runc's state names no freezer cgroup (%v): %s", err, data)
	}
	dir := st.CgroupPaths["freezer"]
	read := func() string { return freezertest.State(dir) }
	// The exec loop, in the container's freezer cgroup (killed, the cgroup
	// thawed, before the harness removes the container).
	freezertest.StartExecLoop(t, dir)
	var orphan *exec.Cmd
	t.Cleanup(func() {
		if orphan != nil && orphan.Process != nil {
			orphan.Process.Kill()
		}
	})
	p.Kill9()
	freezertest.Wedge(t, dir)
	// The killed engine's pause, spinning on the wedged freezer.
	orphan = exec.Command("runc", "--root", stateRoot, "pause", id)
	orphan.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	orphanDone := make(chan error, 1)
	go func() { orphanDone <- orphan.Wait() }()
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-orphanDone:
		t.Fatalf("runc pause on the wedged freezer ended (%v): the wedge is not what the test needs", err)
	default:
	}

	started := time.Now()
	p.Start()
	t.Logf("engine ready %v after its start; the freezer reads %s", time.Since(started), read())
	select {
	case <-orphanDone:
	case <-time.After(5 * time.Second):
		t.Fatal("the orphaned runc pause still runs after the engine's start")
	}
	if !strings.Contains(p.Log(), "killed a runtime command") {
		t.Errorf("the engine's log does not say it killed the orphaned pause:\n%s", p.Log())
	}
	if got := te.inspect(id).State.Status; got != "running" {
		t.Fatalf("after the start the container is %s, want running (freezer %s)", got, read())
	}
	if got := read(); got != "THAWED" {
		t.Fatalf("after the start the freezer reads %s", got)
	}
	// Pause and unpause work, the exec loop still in the cgroup.
	for i := range 3 {
		te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/pause", nil)
		if got := te.inspect(id).State.Status; got != "paused" || read() != "FROZEN" {
			t.Fatalf("pause %d: the container is %s, its freezer %s", i+1, got, read())
		}
		te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/unpause", nil)
		if got := te.inspect(id).State.Status; got != "running" || read() != "THAWED" {
			t.Fatalf("unpause %d: the container is %s, its freezer %s", i+1, got, read())
		}
	}
}
