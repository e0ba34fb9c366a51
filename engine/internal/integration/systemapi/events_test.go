package systemapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/platform/events"
	"github.com/berth-project/berth/engine/testimage"
)

// eventList reads past events with filters.
func (te *testEngine) eventList(query string) []events.Message {
	te.T.Helper()
	body := te.Must(http.StatusOK, "GET", "/events?stream=false&"+query, nil)
	var out []events.Message
	dec := json.NewDecoder(bytes.NewReader(body))
	for dec.More() {
		var m events.Message
		if err := dec.Decode(&m); err != nil {
			te.T.Fatalf("decoding events %s: %v", body, err)
		}
		out = append(out, m)
	}
	return out
}

// actions renders events as "Type Action Name" lines.
func actions(list []events.Message) []string {
	var out []string
	for _, m := range list {
		out = append(out, fmt.Sprintf("%s %s %s", m.Type, m.Action, m.Actor.Attributes["name"]))
	}
	return out
}

func TestImageEvents(t *testing.T) {
	te := startEngine(t)
	start := time.Now()
	te.Load(testimage.Busybox("localhost/ev-base:1", "sh"))
	te.Must(http.StatusCreated, "POST", "/images/ev-base:1/tag?repo=localhost/ev-tag&tag=2", nil)
	te.Must(http.StatusCreated, "POST", "/images/ev-base:1/untag?repo=localhost/ev-tag&tag=2", nil)
	te.Must(http.StatusOK, "GET", "/images/ev-base:1/get?format=docker-archive", nil)
	te.Must(http.StatusOK, "POST", "/images/import?reference=localhost/ev-imported:1", bytes.NewReader(rootfsTar(t)))
	te.Must(http.StatusOK, "DELETE", "/images/ev-imported:1", nil)
	te.Must(http.StatusCreated, "POST", "/volumes/create", map[string]any{"Name": "ev-vol"})

	since := "since=" + fmt.Sprint(start.Add(-time.Second).Unix())
	got := actions(te.eventList(since + "&filters=" + filters(map[string][]string{"type": {"image"}})))
	want := []string{
		"image loadfromarchive localhost/ev-base:1",
		"image tag localhost/ev-tag:2",
		"image untag localhost/ev-tag:2",
		"image save localhost/ev-base:1",
		"image import localhost/ev-imported:1",
		"image untag localhost/ev-imported:1",
		"image remove localhost/ev-imported:1",
	}
	if !slices.Equal(got, want) {
		t.Errorf("image events\n got %q\nwant %q", got, want)
	}
	// Filters: event names one action, image one image by name; values of
	// one key are alternatives, keys must all hold.
	if got := actions(te.eventList(since + "&filters=" + filters(map[string][]string{"event": {"tag", "untag"}, "image": {"localhost/ev-tag:2"}}))); !slices.Equal(got, want[1:3]) {
		t.Errorf("tag/untag of ev-tag: %q", got)
	}
	if got := actions(te.eventList(since + "&filters=" + filters(map[string][]string{"type": {"volume"}}))); !slices.Equal(got, []string{"volume create ev-vol"}) {
		t.Errorf("volume events: %q", got)
	}
	// until bounds the past: nothing happened before the test started.
	if got := te.eventList("since=" + fmt.Sprint(start.Add(-time.Hour).Unix()) + "&until=" + fmt.Sprint(start.Add(-time.Minute).Unix())); len(got) != 0 {
		t.Errorf("events before the test: %q", actions(got))
	}
}

// TestEventStream reads a live stream filtered to image tags while tags
// happen, and checks a 4.x client's stream leaves out what it cannot decode.
func TestEventStream(t *testing.T) {
	te := startEngine(t)
	te.Load(testimage.Busybox("localhost/stream-base:1", "sh"))
	req, err := http.NewRequest("GET", te.Base()+"/v4.3.1/libpod/events?filters="+filters(map[string][]string{"type": {"image"}, "event": {"tag"}}), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := te.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string, 10)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	for i := 1; i <= 3; i++ {
		te.Must(http.StatusCreated, "POST", fmt.Sprintf("/images/stream-base:1/tag?repo=localhost/streamed&tag=%d", i), nil)
		te.Must(http.StatusCreated, "POST", fmt.Sprintf("/images/stream-base:1/untag?repo=localhost/streamed&tag=%d", i), nil)
	}
	for i := 1; i <= 3; i++ {
		select {
		case line := <-lines:
			if !strings.Contains(line, `"Action":"tag"`) || !strings.Contains(line, fmt.Sprintf("localhost/streamed:%d", i)) {
				t.Errorf("streamed event %d: %s", i, line)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no streamed event %d within 10s", i)
		}
	}
}
