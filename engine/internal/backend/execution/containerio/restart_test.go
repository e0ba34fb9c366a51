package containerio_test

import (
	"encoding/json"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
)

// TestEngineRestart stops the engine while containers run, kills one
// container's process meanwhile, and starts a new engine on the same state:
// the restart policy "always" brings that container back, an on-failure
// container that failed meanwhile is restarted (and the restart counted) as
// if the engine had seen it die, an exec session that was running is
// reported ended, and schedules resume.
func TestEngineRestart(t *testing.T) {
	p := enginetest.StartProcess(t, streamOptions())
	te := &testEngine{p.Engine}
	always := te.Create(map[string]any{"command": []string{"sleep", "600"}, "restart_policy": "always"})
	te.start(always)
	userStopped := te.Create(map[string]any{"command": []string{"sleep", "600"}, "restart_policy": "always"})
	te.start(userStopped)
	te.Must(http.StatusNoContent, "POST", "/containers/"+userStopped+"/stop?timeout=0", nil)
	onFailure := te.Create(map[string]any{"command": []string{"sleep", "600"}, "restart_policy": "on-failure", "restart_tries": 2})
	te.start(onFailure)
	var created struct {
		ID string `json:"Id"`
	}
	json.Unmarshal(te.Must(http.StatusCreated, "POST", "/containers/"+always+"/exec", map[string]any{"Cmd": []string{"sleep", "600"}}), &created)
	te.Must(http.StatusOK, "POST", "/exec/"+created.ID+"/start", map[string]any{"Detach": true})

	var d struct {
		State struct {
			Status string
			Pid    int
		}
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+always+"/json", nil), &d)
	oldPid := d.State.Pid
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+onFailure+"/json", nil), &d)
	oldFailurePid := d.State.Pid
	p.Stop()
	for _, pid := range []int{oldPid, oldFailurePid} {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill container process %d: %v", pid, err)
		}
	}
	time.Sleep(500 * time.Millisecond)

	p.Start()
	deadline := time.Now().Add(20 * time.Second)
	for {
		json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+always+"/json", nil), &d)
		if d.State.Status == "running" && d.State.Pid != oldPid && d.State.Pid != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("container with restart policy always was not started again: %+v", d.State)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var failed struct {
		State struct {
			Status string
			Pid    int
		}
		RestartCount int
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+onFailure+"/json", nil), &failed)
		if failed.State.Status == "running" && failed.State.Pid != oldFailurePid && failed.State.Pid != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("on-failure container killed while the engine was down was not restarted: %+v", failed)
		}
	}
	if failed.RestartCount != 1 {
		t.Errorf("on-failure container restarted at engine start: RestartCount %d, want 1", failed.RestartCount)
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+userStopped+"/json", nil), &d)
	if d.State.Status == "running" {
		t.Fatal("a container stopped by its user was started at engine start")
	}
	var inspect struct {
		Running  bool
		ExitCode int
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/exec/"+created.ID+"/json", nil), &inspect)
	if inspect.Running {
		t.Fatalf("exec session from before the restart still reported running: %+v", inspect)
	}
	// The event log survived the restart.
	body := te.Must(http.StatusOK, "GET", "/events?stream=false&filters=%7B%22container%22%3A%5B%22"+always+"%22%5D%2C%22event%22%3A%5B%22exec%22%5D%7D", nil)
	if len(body) == 0 {
		t.Fatal("events recorded before the restart are gone")
	}
}
