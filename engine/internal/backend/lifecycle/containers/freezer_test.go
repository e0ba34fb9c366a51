package containers_test

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/execution/cgroups"
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
	freezer := filepath.Join(st.CgroupPaths["freezer"], "freezer.state")
	read := func() string {
		data, _ := os.ReadFile(freezer)
		return strings.TrimSpace(string(data))
	}

	// The exec loop, in the container's freezer cgroup.
	bin := filepath.Join(t.TempDir(), "execloop")
	build := exec.Command("go", "build", "-o", bin, "./testdata/execloop")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the exec loop: %v\n%s", err, out)
	}
	loop := exec.Command(bin)
	if err := loop.Start(); err != nil {
		t.Fatal(err)
	}
	var orphan *exec.Cmd
	// Before the harness's cleanup (which removes the container): nothing
	// of the test's own may keep the cgroup frozen or busy.
	t.Cleanup(func() {
		os.WriteFile(freezer, []byte("THAWED"), 0o644)
		if orphan != nil && orphan.Process != nil {
			orphan.Process.Kill()
		}
		loop.Process.Kill()
		loop.Wait()
	})
	if err := os.WriteFile(filepath.Join(filepath.Dir(freezer), "cgroup.procs"), []byte(strconv.Itoa(loop.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}

	p.Kill9()
	wedged := false
	for try := 0; try < 2000 && !wedged; try++ {
		os.WriteFile(freezer, []byte("FROZEN"), 0o644)
		for start := time.Now(); read() == "FREEZING"; time.Sleep(time.Millisecond) {
			if time.Since(start) > 300*time.Millisecond {
				wedged = true
				break
			}
			os.WriteFile(freezer, []byte("FROZEN"), 0o644)
		}
		if !wedged {
			os.WriteFile(freezer, []byte("THAWED"), 0o644)
			time.Sleep(time.Duration(1+try%5) * time.Millisecond)
		}
	}
	if !wedged {
		t.Fatal("no freeze of the container with the exec loop wedged in 2000 tries")
	}
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
