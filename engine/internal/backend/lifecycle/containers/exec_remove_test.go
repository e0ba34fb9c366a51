package containers_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestExecRemove: POST /exec/{id}/remove, which podman 4.8 and later send
// after every exec they ran (Podman 6's `podman exec` fails without it).
// An ended session goes at once; a running one only with Force, which
// kills its process in the container; an unknown one is 404.
func TestExecRemove(t *testing.T) {
	te := startEngine(t)
	id := te.create(map[string]any{"command": []string{"sleep", "600"}})
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	session := func(cmd ...string) string {
		var created struct{ ID string }
		json.Unmarshal(te.Must(http.StatusCreated, "POST", "/containers/"+id+"/exec", map[string]any{"Cmd": cmd}), &created)
		te.Must(http.StatusOK, "POST", "/exec/"+created.ID+"/start", map[string]any{"Detach": true})
		return created.ID
	}
	running := func(sid string) bool {
		var ins struct{ Running bool }
		json.Unmarshal(te.Must(http.StatusOK, "GET", "/exec/"+sid+"/json", nil), &ins)
		return ins.Running
	}

	ended := session("true")
	for deadline := time.Now().Add(10 * time.Second); running(ended); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("exec of true still running after 10s")
		}
	}
	te.Must(http.StatusOK, "POST", "/exec/"+ended+"/remove", map[string]any{"Force": false})
	te.Must(http.StatusNotFound, "GET", "/exec/"+ended+"/json", nil)
	te.Must(http.StatusNotFound, "POST", "/exec/"+ended+"/remove", nil)

	long := session("sleep", "300")
	if !running(long) {
		t.Fatal("exec of sleep 300 is not running")
	}
	if body := te.Must(http.StatusConflict, "POST", "/exec/"+long+"/remove", map[string]any{"Force": false}); !strings.Contains(string(body), "running") {
		t.Errorf("removal of a running session without force: %s", body)
	}
	if !running(long) {
		t.Fatal("a refused removal stopped the session")
	}
	te.Must(http.StatusOK, "POST", "/exec/"+long+"/remove", map[string]any{"Force": true})
	te.Must(http.StatusNotFound, "GET", "/exec/"+long+"/json", nil)
	// The killed process is gone from the container: only its init and
	// the top's own process remain.
	var top struct{ Processes [][]string }
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+id+"/top", nil), &top)
	for _, p := range top.Processes {
		if strings.Contains(strings.Join(p, " "), "sleep 300") {
			t.Errorf("the removed session's process still runs: %v", p)
		}
	}
	te.Must(http.StatusBadRequest, "POST", "/exec/"+session("true")+"/remove", "not an object")
}
