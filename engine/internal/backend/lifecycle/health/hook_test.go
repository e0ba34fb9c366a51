package health

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/core"
)

// oneContainer is the container backend of one container whose state the
// test sets; only what the hook and the schedule use is implemented.
type oneContainer struct {
	core.Containers
	mu sync.Mutex
	c  core.Container
}

func (o *oneContainer) Lookup(context.Context, string) (*core.Container, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := o.c
	return &c, nil
}

func (o *oneContainer) SetHealth(_ context.Context, _ string, h core.HealthCheckResults) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.c.Health = h
	return nil
}

func (o *oneContainer) setState(s core.ContainerState) {
	o.mu.Lock()
	o.c.State = s
	o.mu.Unlock()
}

// TestLateDiedKeepsTheNewRunsSchedule: the "died" of a run that the exit
// watcher delivers after a restart has started the next run does not end
// that run's schedule (its healthchecks would stop for good); a "died" or
// "stop" of a container that is not running does.
func TestLateDiedKeepsTheNewRunsSchedule(t *testing.T) {
	ctrs := &oneContainer{c: core.Container{ID: "c1", State: core.StateRunning, Spec: core.ContainerSpec{
		HealthConfig: &core.HealthConfig{Test: []string{"CMD", "true"}, Interval: time.Hour},
	}}}
	k := NewChecker(ctrs, nil, nil)
	defer k.Close()
	ctx := context.Background()
	scheduled := func() bool {
		k.mu.Lock()
		defer k.mu.Unlock()
		_, ok := k.schedules["c1"]
		return ok
	}
	k.Hook(ctx, core.ContainerEvent{Type: core.EventStart, ID: "c1"})
	if !scheduled() {
		t.Fatal("a started container with a healthcheck was not scheduled")
	}
	k.Hook(ctx, core.ContainerEvent{Type: core.EventDied, ID: "c1"})
	if !scheduled() {
		t.Fatal("a died delivered while the container runs again ended its schedule")
	}
	ctrs.setState(core.StateExited)
	k.Hook(ctx, core.ContainerEvent{Type: core.EventDied, ID: "c1"})
	if scheduled() {
		t.Fatal("the schedule of an exited container was kept")
	}
	ctrs.setState(core.StateRunning)
	k.Hook(ctx, core.ContainerEvent{Type: core.EventRestart, ID: "c1"})
	ctrs.setState(core.StateStopped)
	k.Hook(ctx, core.ContainerEvent{Type: core.EventStop, ID: "c1"})
	if scheduled() {
		t.Fatal("the schedule of a stopped container was kept")
	}
}
