package restart

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/core"
)

func uintp(u uint) *uint { return &u }

func TestParse(t *testing.T) {
	tests := []struct {
		name  string
		tries *uint
		want  Policy
		bad   bool
	}{
		{name: "", want: Policy{Name: No}},
		{name: "no", want: Policy{Name: No}},
		{name: "always", want: Policy{Name: Always}},
		{name: "unless-stopped", want: Policy{Name: UnlessStopped}},
		{name: "on-failure", want: Policy{Name: OnFailure}},
		{name: "on-failure:3", want: Policy{Name: OnFailure, MaxRetries: 3}},
		{name: "on-failure", tries: uintp(5), want: Policy{Name: OnFailure, MaxRetries: 5}},
		{name: "on-failure:x", bad: true},
		{name: "on-failure:-1", bad: true},
		{name: "always:2", bad: true},
		{name: "always", tries: uintp(2), bad: true},
		{name: "sometimes", bad: true},
	}
	for _, tt := range tests {
		got, err := Parse(tt.name, tt.tries)
		if tt.bad {
			if !errors.Is(err, core.ErrInvalidArgument) {
				t.Errorf("Parse(%q) err = %v, want invalid argument", tt.name, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Parse(%q, %v) = %+v, %v; want %+v", tt.name, tt.tries, got, err, tt.want)
		}
	}
}

func TestShouldRestart(t *testing.T) {
	tests := []struct {
		policy   Policy
		exit     int32
		byUser   bool
		restarts int
		want     bool
	}{
		{Policy{Name: No}, 1, false, 0, false},
		{Policy{Name: Always}, 0, false, 100, true},
		{Policy{Name: Always}, 1, true, 0, false},
		{Policy{Name: UnlessStopped}, 0, false, 0, true},
		{Policy{Name: UnlessStopped}, 0, true, 0, false},
		{Policy{Name: OnFailure}, 0, false, 0, false},
		{Policy{Name: OnFailure}, 2, false, 50, true},
		{Policy{Name: OnFailure, MaxRetries: 2}, 2, false, 1, true},
		{Policy{Name: OnFailure, MaxRetries: 2}, 2, false, 2, false},
		{Policy{Name: OnFailure, MaxRetries: 2}, 137, true, 0, false},
	}
	for _, tt := range tests {
		if got := tt.policy.ShouldRestart(tt.exit, tt.byUser, tt.restarts); got != tt.want {
			t.Errorf("%+v.ShouldRestart(%d, %v, %d) = %v, want %v", tt.policy, tt.exit, tt.byUser, tt.restarts, got, tt.want)
		}
	}
}

func TestDecide(t *testing.T) {
	c := &core.Container{State: core.StateExited, ExitCode: 1, Spec: core.ContainerSpec{RestartPolicy: "on-failure"}}
	if !Decide(c) {
		t.Fatal("exited container with on-failure and exit 1 not restarted")
	}
	running := *c
	running.State = core.StateRunning
	if Decide(&running) {
		t.Fatal("running container restarted")
	}
	removed := *c
	removed.Spec.Remove = true
	if Decide(&removed) {
		t.Fatal("auto-remove container restarted")
	}
}

func TestCutStart(t *testing.T) {
	cut := core.Container{State: core.StateCreated, StartPending: true, Spec: core.ContainerSpec{RestartPolicy: "always"}}
	for _, tc := range []struct {
		name string
		edit func(*core.Container)
		want bool
	}{
		{"always", func(*core.Container) {}, true},
		{"unless-stopped", func(c *core.Container) { c.Spec.RestartPolicy = "unless-stopped" }, true},
		{"on-failure, its restart cut", func(c *core.Container) { c.Spec.RestartPolicy = "on-failure"; c.RestartCount = 3 }, true},
		{"policy no", func(c *core.Container) { c.Spec.RestartPolicy = "" }, false},
		{"initialized by init, no start asked", func(c *core.Container) { c.StartPending = false }, false},
		{"running: the start ran", func(c *core.Container) { c.State = core.StateRunning }, false},
		{"stopped by a user", func(c *core.Container) { c.StoppedByUser = true }, false},
		{"auto-remove", func(c *core.Container) { c.Spec.Remove = true }, false},
	} {
		c := cut
		tc.edit(&c)
		if got := CutStart(&c); got != tc.want {
			t.Errorf("%s: CutStart = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// fakeContainers is the part of the core a Supervisor uses.
type fakeContainers struct {
	core.Containers
	mu      sync.Mutex
	c       core.Container
	starts  int
	started chan struct{}
	// exits, when set, makes a start end at once, as a container that
	// fails right away can: the container is exited and exits hears of it
	// (the died event) before the start returns.
	exits func(ctx context.Context, id string)
}

func (f *fakeContainers) Lookup(context.Context, string) (*core.Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.c
	return &c, nil
}

func (f *fakeContainers) StartByPolicy(ctx context.Context, id string, want func(*core.Container) bool, countRestart bool) (bool, error) {
	f.mu.Lock()
	c := f.c
	if !want(&c) {
		f.mu.Unlock()
		return false, nil
	}
	if countRestart {
		f.c.RestartCount++
	}
	f.starts++
	f.c.State = core.StateRunning
	if f.exits != nil {
		f.c.State = core.StateExited
	}
	f.mu.Unlock()
	if f.exits != nil {
		f.exits(ctx, id)
	}
	f.started <- struct{}{}
	return true, nil
}

func TestSupervisorRestartsUpToLimit(t *testing.T) {
	fake := &fakeContainers{c: core.Container{ID: "c1", State: core.StateExited, ExitCode: 3, Spec: core.ContainerSpec{RestartPolicy: "on-failure:2"}}, started: make(chan struct{}, 4)}
	s := NewSupervisor(fake, nil)
	s.Backoff, s.MaxBackoff = time.Millisecond, 4*time.Millisecond
	defer s.Close()
	for i := 0; i < 3; i++ {
		// The previous restart has finished its bookkeeping.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			s.mu.Lock()
			_, busy := s.pending["c1"]
			s.mu.Unlock()
			if !busy || time.Now().After(deadline) {
				break
			}
		}
		fake.mu.Lock()
		fake.c.State = core.StateExited
		fake.mu.Unlock()
		s.Hook(context.Background(), core.ContainerEvent{Type: core.EventDied, ID: "c1"})
		// A duplicate died event for the same exit is ignored.
		s.Hook(context.Background(), core.ContainerEvent{Type: core.EventDied, ID: "c1"})
		if i < 2 {
			select {
			case <-fake.started:
			case <-time.After(5 * time.Second):
				t.Fatalf("restart %d did not happen", i+1)
			}
		}
	}
	s.Close()
	if fake.starts != 2 || fake.c.RestartCount != 2 {
		t.Fatalf("starts %d, restart count %d; want 2 and 2", fake.starts, fake.c.RestartCount)
	}
}

// TestSupervisorYieldsToAClient: a client's start and checkpoint (a stop
// by the user) during the backoff win over the policy's decision, taken
// before it: the container is not started, its restart not counted.
func TestSupervisorYieldsToAClient(t *testing.T) {
	fake := &fakeContainers{c: core.Container{ID: "c1", State: core.StateExited, ExitCode: 0, Spec: core.ContainerSpec{RestartPolicy: "always"}}, started: make(chan struct{}, 4)}
	s := NewSupervisor(fake, nil)
	s.Backoff, s.MaxBackoff = 200*time.Millisecond, 200*time.Millisecond
	defer s.Close()
	s.Hook(context.Background(), core.ContainerEvent{Type: core.EventDied, ID: "c1"})
	time.Sleep(50 * time.Millisecond)
	fake.mu.Lock()
	fake.c.State, fake.c.StoppedByUser, fake.c.Checkpointed = core.StateExited, true, true
	fake.mu.Unlock()
	select {
	case <-fake.started:
		t.Fatal("the policy started a container its user had stopped since the policy looked")
	case <-time.After(500 * time.Millisecond):
	}
	s.Close()
	if fake.starts != 0 || fake.c.RestartCount != 0 {
		t.Fatalf("starts %d, restart count %d; want none", fake.starts, fake.c.RestartCount)
	}
}

func TestSupervisorDiedDuringStart(t *testing.T) {
	fake := &fakeContainers{c: core.Container{ID: "c1", State: core.StateExited, ExitCode: 3, Spec: core.ContainerSpec{RestartPolicy: "on-failure:3"}}, started: make(chan struct{}, 8)}
	s := NewSupervisor(fake, nil)
	fake.exits = func(ctx context.Context, id string) { s.Hook(ctx, core.ContainerEvent{Type: core.EventDied, ID: id}) }
	s.Backoff, s.MaxBackoff = time.Millisecond, 4*time.Millisecond
	defer s.Close()
	s.Hook(context.Background(), core.ContainerEvent{Type: core.EventDied, ID: "c1"})
	for i := 0; i < 3; i++ {
		select {
		case <-fake.started:
		case <-time.After(5 * time.Second):
			t.Fatalf("restart %d did not happen", i+1)
		}
	}
	// No fourth restart: the limit is 3.
	select {
	case <-fake.started:
		t.Fatal("restarted past the limit")
	case <-time.After(200 * time.Millisecond):
	}
	s.Close()
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if fake.starts != 3 || fake.c.RestartCount != 3 {
		t.Fatalf("starts %d, restart count %d; want 3 and 3", fake.starts, fake.c.RestartCount)
	}
}
