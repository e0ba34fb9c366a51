package containers_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestStopInTheRestartBackoff: a crash-looping restart=always container
// spends most of its time in the supervisor's backoff between two runs. A
// stop then finds it exited (304, nothing to stop), but it is the user's
// stop all the same: the pending restart does not run it again (as dockerd
// stops a restarting container; before, docker stop answered and the
// container came back a moment later). A start runs it again, with its
// policy.
func TestStopInTheRestartBackoff(t *testing.T) {
	te := startEngine(t)
	id := te.create(map[string]any{"name": "crashloop", "command": []string{"false"}, "restart_policy": "always"})
	te.Must(http.StatusNoContent, "POST", "/containers/crashloop/start", nil)
	// Inside the backoff the container is exited and every restart counted
	// has run (a restart under way is counted before its start event).
	starts := func() int {
		filters := url.QueryEscape(`{"container":["` + id + `"],"event":["start"]}`)
		return strings.Count(string(te.Must(http.StatusOK, "GET", "/events?stream=false&filters="+filters, nil)), `"status":"start"`)
	}
	// Four restarts in, the backoff is 1.6 s: long enough to stop the
	// container inside it.
	var count int
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		d := te.inspect(id)
		if d.RestartCount >= 4 && d.State.Status == "exited" && starts() == d.RestartCount+1 {
			count = d.RestartCount
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no restart backoff to stop in: %+v, %d restarts", d.State, d.RestartCount)
		}
	}
	te.Must(http.StatusNotModified, "POST", "/containers/crashloop/stop", nil)
	time.Sleep(4 * time.Second) // past the 1.6 s backoff, and the next one
	if d := te.inspect(id); d.State.Status != "exited" || d.RestartCount != count {
		t.Fatalf("after a stop in the backoff the container is %s with %d restarts (%d at the stop): its policy restarted it", d.State.Status, d.RestartCount, count)
	}
	te.Must(http.StatusNoContent, "POST", "/containers/crashloop/start", nil)
	for deadline := time.Now().Add(30 * time.Second); te.inspect(id).RestartCount <= count; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("started again, the container's policy no longer restarts it")
		}
	}
	te.Must(http.StatusOK, "DELETE", "/containers/crashloop?force=true&timeout=0", nil)
}
