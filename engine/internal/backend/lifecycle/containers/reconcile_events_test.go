package containers_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestDiedEventForExitWhileEngineDown: a container that exits while no
// engine runs gets its died event (with the exit code) when the engine starts
// again and reconciles it.
func TestDiedEventForExitWhileEngineDown(t *testing.T) {
	p, te := startEngineProcess(t)
	te.loadBusybox()
	id := te.create(map[string]any{"name": "quitter", "command": []string{"sh", "-c", "sleep 1; exit 4"}})
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	since := time.Now().Add(-time.Second)
	p.Stop()
	time.Sleep(2 * time.Second)
	p.Start()

	if d := te.inspect(id); d.State.Status != "exited" || d.State.ExitCode != 4 {
		t.Fatalf("after restart: %+v", d.State)
	}
	filters, _ := json.Marshal(map[string][]string{"event": {"died"}, "container": {id}})
	q := "/events?stream=false&since=" + strconv.FormatInt(since.Unix(), 10) + "&filters=" + url.QueryEscape(string(filters))
	body := te.Must(http.StatusOK, "GET", q, nil)
	var died []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		var ev struct {
			Status string
			Actor  struct{ Attributes map[string]string }
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("event %q: %v", sc.Bytes(), err)
		}
		died = append(died, map[string]any{"status": ev.Status, "exit": ev.Actor.Attributes["containerExitCode"]})
	}
	if len(died) != 1 || died[0]["status"] != "died" || died[0]["exit"] != "4" {
		t.Fatalf("died events after the restart: %v (all: %s)", died, body)
	}
}

// TestQuickExitDiesAfterStart: a process that exits as soon as it runs is
// recorded as started, then died, in that order, with the time it started:
// the exit watch could report its exit while the start was still to record
// it, and the died event came first, without a start time (docker events
// had a die without execDuration before the start; seen in a CI run). Many
// starts at once make that window likely.
func TestQuickExitDiesAfterStart(t *testing.T) {
	te := startEngine(t)
	te.loadBusybox()
	since := time.Now().Add(-time.Second)
	var ids []string
	for i := 0; i < 24; i++ {
		ids = append(ids, te.create(map[string]any{"command": []string{"true"}}))
	}
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, body := te.Do("POST", "/containers/"+id+"/start", nil); code != http.StatusNoContent {
				t.Errorf("start %s: %d %s", id, code, body)
			}
		}()
	}
	wg.Wait()
	for _, id := range ids {
		te.wait(id)
	}
	filters, _ := json.Marshal(map[string][]string{"event": {"start", "died"}})
	q := "/events?stream=false&since=" + strconv.FormatInt(since.Unix(), 10) + "&filters=" + url.QueryEscape(string(filters))
	seen := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(te.Must(http.StatusOK, "GET", q, nil)))
	for sc.Scan() {
		var ev struct{ Status, ID string }
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("event %q: %v", sc.Bytes(), err)
		}
		seen[ev.ID] = append(seen[ev.ID], ev.Status)
	}
	for _, id := range ids {
		if got := strings.Join(seen[id], " "); got != "start died" {
			t.Errorf("events of %s: %q, want \"start died\"", id[:12], got)
		}
		if d := te.inspect(id); d.State.StartedAt.IsZero() || d.State.FinishedAt.Before(d.State.StartedAt) {
			t.Errorf("%s: started %v, finished %v", id[:12], d.State.StartedAt, d.State.FinishedAt)
		}
	}
}
