package events

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/platform/state"
	"github.com/berth-project/berth/engine/internal/core"
)

func newBus(t *testing.T) *Bus {
	t.Helper()
	db, err := state.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return NewBus(db, nil)
}

func TestPublishAndReadPast(t *testing.T) {
	ctx := context.Background()
	bus := newBus(t)
	t0 := time.Now().Add(-time.Minute)
	code := int32(3)
	bus.ContainerHook(ctx, core.ContainerEvent{Type: core.EventCreate, Time: t0, ID: "aaa111", Name: "web", Image: "busybox", Labels: map[string]string{"app": "x"}})
	bus.ContainerHook(ctx, core.ContainerEvent{Type: core.EventDied, Time: t0.Add(time.Second), ID: "aaa111", Name: "web", Image: "busybox", ExitCode: &code})
	if err := bus.Publish(ctx, Event{Type: TypeImage, Status: "pull", ID: "img1", Name: "busybox", Time: t0.Add(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}

	read := func(opts ReadOptions) []Event {
		var got []Event
		if err := bus.Read(ctx, opts, func(e Event) error { got = append(got, e); return nil }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	mustFilter := func(m map[string][]string) Filter {
		f, err := ParseFilter(m)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	if got := read(ReadOptions{}); len(got) != 3 {
		t.Fatalf("all past events: got %d", len(got))
	}
	died := read(ReadOptions{Filter: mustFilter(map[string][]string{"type": {"container"}, "container": {"web"}, "event": {"died"}})})
	if len(died) != 1 || died[0].ExitCode != 3 {
		t.Fatalf("died events: %+v", died)
	}
	msg := died[0].Message()
	if msg.Actor.Attributes["containerExitCode"] != "3" || msg.Actor.Attributes["name"] != "web" || msg.Action != "died" || msg.Type != "container" {
		t.Fatalf("message %+v", msg)
	}
	if got := read(ReadOptions{Filter: mustFilter(map[string][]string{"label": {"app=x"}})}); len(got) != 1 || got[0].Status != "create" {
		t.Fatalf("label filter: %+v", got)
	}
	if got := read(ReadOptions{Filter: mustFilter(map[string][]string{"container": {"aaa"}, "image": {"busybox"}})}); len(got) != 0 {
		t.Fatalf("keys must be ANDed: %+v", got)
	}
	if got := read(ReadOptions{Filter: mustFilter(map[string][]string{"event": {"create", "pull"}})}); len(got) != 2 {
		t.Fatalf("values must be ORed: %+v", got)
	}
	if got := read(ReadOptions{Since: t0.Add(time.Second)}); len(got) != 2 {
		t.Fatalf("since: %+v", got)
	}
	if got := read(ReadOptions{Until: t0.Add(time.Second)}); len(got) != 1 {
		t.Fatalf("until: %+v", got)
	}
	// JSON of the wire message uses Podman's names.
	raw, _ := json.Marshal(msg)
	var generic map[string]any
	_ = json.Unmarshal(raw, &generic)
	for _, k := range []string{"status", "id", "from", "Type", "Action", "Actor", "scope", "time", "timeNano"} {
		if _, ok := generic[k]; !ok {
			t.Errorf("wire message lacks %q: %s", k, raw)
		}
	}
}

func TestStreamDeliversNewEventsOnly(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bus := newBus(t)
	if err := bus.Publish(ctx, Event{Type: TypeContainer, Status: "create", ID: "old"}); err != nil {
		t.Fatal(err)
	}
	got := make(chan Event, 4)
	var wg sync.WaitGroup
	wg.Add(1)
	ready := make(chan struct{})
	go func() {
		defer wg.Done()
		f, _ := ParseFilter(map[string][]string{"type": {"container"}})
		close(ready)
		_ = bus.Read(ctx, ReadOptions{Stream: true, Filter: f}, func(e Event) error { got <- e; return nil })
	}()
	<-ready
	// Give the reader time to subscribe.
	deadline := time.Now().Add(5 * time.Second)
	for {
		bus.mu.Lock()
		n := len(bus.subs)
		bus.mu.Unlock()
		if n == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = bus.Publish(ctx, Event{Type: TypeImage, Status: "pull", ID: "filtered-out"})
	_ = bus.Publish(ctx, Event{Type: TypeContainer, Status: "start", ID: "new"})
	select {
	case e := <-got:
		if e.ID != "new" {
			t.Fatalf("stream delivered %+v first", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no live event")
	}
	cancel()
	wg.Wait()
}

func TestStreamWithSinceHasNoGapOrDuplicate(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bus := newBus(t)
	start := time.Now().Add(-time.Hour)
	for i := 0; i < 20; i++ {
		_ = bus.Publish(ctx, Event{Type: TypeContainer, Status: "start", ID: "c"})
	}
	seen := map[int64]bool{}
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = bus.Read(ctx, ReadOptions{Stream: true, Since: start}, func(e Event) error {
			mu.Lock()
			defer mu.Unlock()
			if seen[e.Seq] {
				t.Errorf("duplicate seq %d", e.Seq)
			}
			seen[e.Seq] = true
			if len(seen) == 40 {
				cancel()
			}
			return nil
		})
	}()
	for i := 0; i < 20; i++ {
		_ = bus.Publish(context.Background(), Event{Type: TypeContainer, Status: "stop", ID: "c"})
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("saw %d of 40 events", len(seen))
	}
}

func TestParseFilter(t *testing.T) {
	if _, err := ParseFilter(map[string][]string{"bogus": {"x"}}); !errors.Is(err, ErrBadFilter) {
		t.Fatalf("unknown key: %v", err)
	}
	if _, err := ParseFilterStrings([]string{"novalue"}); !errors.Is(err, ErrBadFilter) {
		t.Fatalf("no =: %v", err)
	}
	f, err := ParseFilterStrings([]string{"STATUS=start", "label=app"})
	if err != nil {
		t.Fatal(err)
	}
	if !f.Match(Event{Status: "start", Attributes: map[string]string{"app": "1"}}) {
		t.Fatal("status synonym or bare label key did not match")
	}
	if f.Match(Event{Status: "start"}) {
		t.Fatal("label filter matched an event without the label")
	}
}

func FuzzParseFilter(f *testing.F) {
	f.Add([]byte(`{"type":["container"],"event":["died","start"]}`))
	f.Add([]byte(`{"label":["a=b","c"]}`))
	f.Add([]byte(`{"bogus":[""]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var m map[string][]string
		if json.Unmarshal(raw, &m) != nil {
			return
		}
		flt, err := ParseFilter(m)
		if err != nil {
			if !errors.Is(err, ErrBadFilter) {
				t.Fatalf("error %v is not ErrBadFilter", err)
			}
			return
		}
		// Matching never panics, and an empty filter set matches everything.
		e := Event{Type: TypeContainer, Status: "start", ID: "abc", Name: "n", Attributes: map[string]string{"a": "b"}}
		matched := flt.Match(e)
		if len(m) == 0 && !matched {
			t.Fatal("empty filter rejected an event")
		}
	})
}

func TestEmitRecordsEveryKind(t *testing.T) {
	b := newBus(t)
	ctx := context.Background()
	for _, typ := range []core.EventType{core.EventNetwork, core.EventPod, core.EventSecret, core.EventImage} {
		b.Emit(ctx, core.Event{Type: typ, Action: "create", ID: "id-" + string(typ), Name: "n-" + string(typ), Attributes: map[string]string{"driver": "x"}})
	}
	filter, err := ParseFilter(map[string][]string{"secret": {"n-secret"}, "type": {"secret"}})
	if err != nil {
		t.Fatal(err)
	}
	var got []Event
	if err := b.Read(ctx, ReadOptions{Filter: filter}, func(e Event) error { got = append(got, e); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != "id-secret" || got[0].Status != "create" || got[0].Attributes["driver"] != "x" || got[0].Time.IsZero() {
		t.Fatalf("secret events: %+v", got)
	}
}

func TestDecodableByV4(t *testing.T) {
	for _, tc := range []struct {
		e    Event
		want bool
	}{
		{Event{Type: TypeContainer, Status: "died"}, true},
		{Event{Type: TypeImage, Status: "loadfromarchive"}, true},
		{Event{Type: TypeNetwork, Status: "connect"}, true},
		{Event{Type: TypeImage, Status: "load"}, false},
		{Event{Type: TypeSecret, Status: "create"}, false},
		{Event{Type: TypeContainer, Status: "bogus"}, false},
		// Podman 5 added these: podman 4.3.1's events crashed on them.
		{Event{Type: TypeContainer, Status: "update"}, false},
		{Event{Type: TypeContainer, Status: "oom"}, false},
	} {
		if got := DecodableByV4(tc.e); got != tc.want {
			t.Errorf("DecodableByV4(%s %s) = %v, want %v", tc.e.Type, tc.e.Status, got, tc.want)
		}
	}
}
