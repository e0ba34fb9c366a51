package exec

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/backend/platform/state"
	"github.com/berth-project/berth/engine/internal/core"
)

func TestMergeEnv(t *testing.T) {
	got := mergeEnv([]string{"PATH=/bin", "A=1", "B=2"}, []string{"A=x", "C=3"})
	want := []string{"PATH=/bin", "A=x", "B=2", "C=3"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("mergeEnv = %v, want %v", got, want)
	}
}

func TestStartFailureCode(t *testing.T) {
	for msg, want := range map[string]int{
		`exec: "x": executable file not found in $PATH`: 127,
		"open /bin/x: no such file or directory":        127,
		"exec: permission denied":                       126,
		"runc exploded":                                 125,
	} {
		if got := startFailureCode(errors.New(msg)); got != want {
			t.Errorf("startFailureCode(%q) = %d, want %d", msg, got, want)
		}
	}
}

func TestProcessForUsesTheBundle(t *testing.T) {
	bundle := t.TempDir()
	spec := specs.Spec{Process: &specs.Process{
		Args: []string{"sleep", "1"}, Env: []string{"PATH=/usr/bin", "TERM=dumb"}, Cwd: "/work",
		User:         specs.User{UID: 5},
		Capabilities: &specs.LinuxCapabilities{Bounding: []string{"CAP_CHOWN"}},
		ConsoleSize:  &specs.Box{Height: 1, Width: 1},
	}}
	data, _ := json.Marshal(spec)
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	c := &core.Container{Bundle: bundle}
	p := ProcessFor(c, []string{"sh", "-c", "true"}, true)
	if !reflect.DeepEqual(p.Args, []string{"sh", "-c", "true"}) || !p.Terminal || p.Cwd != "/work" || p.User.UID != 5 {
		t.Fatalf("process %+v", p)
	}
	if p.Capabilities == nil || p.ConsoleSize != nil {
		t.Fatalf("capabilities must be kept and the console size dropped: %+v", p)
	}
	if !reflect.DeepEqual(p.Env, []string{"PATH=/usr/bin", "TERM=xterm"}) {
		t.Fatalf("env %v", p.Env)
	}
	// Without a bundle: the request's environment and a default PATH.
	p = ProcessFor(&core.Container{Bundle: t.TempDir(), Spec: core.ContainerSpec{Env: map[string]string{"K": "v"}}}, []string{"true"}, false)
	if p.Cwd != "/" || len(p.Env) != 2 || p.Env[1] != "K=v" {
		t.Fatalf("fallback process %+v", p)
	}
}

func TestPruneEnded(t *testing.T) {
	ctx := context.Background()
	db, err := state.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.AddContainer(ctx, state.ContainerRecord{ID: "c1", Name: "c1", State: "running", Created: time.Now(), Data: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	m := NewManager(nil, db, nil, nil)
	put := func(id string, s Session) {
		s.ID, s.ContainerID = id, "c1"
		if err := m.put(ctx, &s); err != nil {
			t.Fatal(err)
		}
	}
	put("old", Session{Started: true, Exited: time.Now().Add(-time.Hour), ExitCode: 1})
	put("recent", Session{Started: true, Exited: time.Now()})
	put("running", Session{Started: true, Running: true})
	put("unstarted", Session{})
	if err := m.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	m.pruneEnded(ctx)
	if _, err := m.Get(ctx, "old"); !errors.Is(err, core.ErrNoSuchExecSession) {
		t.Fatalf("old ended session kept: %v", err)
	}
	for _, id := range []string{"recent", "running", "unstarted"} {
		if _, err := m.Get(ctx, id); err != nil {
			t.Fatalf("session %s pruned: %v", id, err)
		}
	}
}
