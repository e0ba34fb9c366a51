package containers_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
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
