// Package restart applies container restart policies: when a container's
// process exits, the Supervisor decides from the policy, exit code, restart
// count and whether a user stopped it, and starts the container again.
package restart

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-project/berth/engine/internal/core"
)

// Policy names, as Podman spells them.
const (
	No            = "no"
	OnFailure     = "on-failure"
	Always        = "always"
	UnlessStopped = "unless-stopped"
)

// Policy is a parsed restart policy.
type Policy struct {
	Name string
	// MaxRetries limits on-failure restarts; zero means unlimited.
	MaxRetries uint
}

// Parse reads a policy as given in a creation spec: the name, optionally
// "on-failure:N", plus the separate restart_tries field.
func Parse(name string, tries *uint) (Policy, error) {
	base, count, hasCount := strings.Cut(name, ":")
	p := Policy{Name: base}
	switch base {
	case "", No:
		p.Name = No
	case OnFailure, Always, UnlessStopped:
	default:
		return Policy{}, core.InvalidArgument("restart_policy", fmt.Errorf("%q is not one of no, on-failure[:N], always, unless-stopped", name))
	}
	if hasCount {
		if base != OnFailure {
			return Policy{}, core.InvalidArgument("restart_policy", fmt.Errorf("only on-failure takes a retry count, got %q", name))
		}
		n, err := strconv.ParseUint(count, 10, 32)
		if err != nil {
			return Policy{}, core.InvalidArgument("restart_policy", fmt.Errorf("retry count %q is not a non-negative integer", count))
		}
		p.MaxRetries = uint(n)
	}
	if tries != nil {
		if base != OnFailure && *tries > 0 {
			return Policy{}, core.InvalidArgument("restart_tries", errors.New("restart tries need the on-failure policy"))
		}
		p.MaxRetries = *tries
	}
	return p, nil
}

// ShouldRestart decides whether a container that exited with exitCode is
// started again, after restarts earlier restarts. A container stopped by a
// user stays stopped whatever its policy.
func (p Policy) ShouldRestart(exitCode int32, stoppedByUser bool, restarts int) bool {
	if stoppedByUser {
		return false
	}
	switch p.Name {
	case Always, UnlessStopped:
		return true
	case OnFailure:
		if exitCode == 0 {
			return false
		}
		return p.MaxRetries == 0 || restarts < int(p.MaxRetries)
	default:
		return false
	}
}

// CutStart reports whether c is a container whose start an engine kill -9
// cut after the runtime created it (StateCreated, StartPending) and whose
// policy wants it running: any policy but "no", unless a user stopped it.
// The engine's start finishes such a start (a restart policy's restart
// among them, already counted); with policy "no" the container stays
// initialized, as after "podman init", for its client to start again.
func CutStart(c *core.Container) bool {
	return c.State == core.StateCreated && c.StartPending && !c.StoppedByUser && !c.Spec.Remove &&
		ForContainer(c).Name != No
}

// ForContainer returns the policy of c; an unparsable stored policy is "no".
func ForContainer(c *core.Container) Policy {
	p, err := Parse(c.Spec.RestartPolicy, c.Spec.RestartTries)
	if err != nil {
		return Policy{Name: No}
	}
	return p
}

// Decide reports whether c, as it is now, would be restarted: it must have
// exited (or been stopped) and its policy must allow it (a checkpoint that
// stopped it is a client's stop).
func Decide(c *core.Container) bool {
	if c.State != core.StateExited && c.State != core.StateStopped {
		return false
	}
	if c.Spec.Remove {
		return false
	}
	return ForContainer(c).ShouldRestart(c.ExitCode, c.StoppedByUser, c.RestartCount)
}

// Supervisor restarts containers whose process exited, as their policy says.
type Supervisor struct {
	containers core.Containers
	logger     *slog.Logger
	// Backoff is the delay before the first restart, doubled for each
	// further restart up to MaxBackoff.
	Backoff    time.Duration
	MaxBackoff time.Duration

	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc

	mu sync.Mutex
	// pending holds the containers with a restart under way; true when a
	// died event came meanwhile and the container must be looked at again.
	pending map[string]bool
}

// NewSupervisor returns a Supervisor; register its Hook with
// containers.Subscribe and call Close on shutdown.
func NewSupervisor(containers core.Containers, logger *slog.Logger) *Supervisor {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Supervisor{containers: containers, logger: logger, Backoff: 100 * time.Millisecond, MaxBackoff: 10 * time.Second, ctx: ctx, cancel: cancel, pending: map[string]bool{}}
}

// Hook reacts to container events: a died event may trigger a restart.
func (s *Supervisor) Hook(_ context.Context, ev core.ContainerEvent) {
	if ev.Type != core.EventDied {
		return
	}
	// One restart at a time per container. A died event that comes while
	// one is under way (a restarted container that exited at once, even
	// before Start returned) makes it look again when it is done: whether
	// that restarts the container is decided from its state then, so a
	// duplicate event for the same exit does not count twice.
	s.mu.Lock()
	if _, busy := s.pending[ev.ID]; busy {
		s.pending[ev.ID] = true
		s.mu.Unlock()
		return
	}
	s.pending[ev.ID] = false
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			s.maybeRestart(ev.ID)
			s.mu.Lock()
			again := s.pending[ev.ID]
			if !again || s.ctx.Err() != nil {
				delete(s.pending, ev.ID)
				s.mu.Unlock()
				return
			}
			s.pending[ev.ID] = false
			s.mu.Unlock()
		}
	}()
}

func (s *Supervisor) delay(restarts int) time.Duration {
	d := s.Backoff
	for i := 0; i < restarts && d < s.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, s.MaxBackoff)
}

func (s *Supervisor) maybeRestart(id string) {
	c, err := s.containers.Lookup(s.ctx, id)
	if err != nil || !Decide(c) {
		return
	}
	select {
	case <-time.After(s.delay(c.RestartCount)):
	case <-s.ctx.Done():
		return
	}
	// Decided again under the container's lock, right before the start: a
	// user may have stopped, restarted, checkpointed or removed it meanwhile.
	started, err := s.containers.StartByPolicy(s.ctx, id, Decide, true)
	if err != nil && !errors.Is(err, core.ErrNotModified) && !errors.Is(err, core.ErrNoSuchContainer) {
		s.logger.Error("restarting container", "container", id, "policy", c.Spec.RestartPolicy, "err", err)
		return
	}
	if started {
		s.logger.Info("restarted container", "container", id, "policy", c.Spec.RestartPolicy)
	}
}

// StartAtBoot starts the containers whose policy is always (or
// unless-stopped) and that were not stopped by a user; the engine calls it
// once when it starts. An on-failure container that failed while no engine
// watched it (its died event was never delivered) is handled as that event
// would have been: restarted after the backoff, the restart counted against
// its retries. A start a kill -9 cut after the runtime's create is
// finished where the policy wants the container running (CutStart). The
// starts run in the background, one after another: the
// engine answers at once instead of after every such container's start
// (a restart-to-ready of seconds with a few dozen of them), as Podman's
// boot-time restart service does not hold up its API either. Each is
// decided again right before its start, so a client's stop or removal
// meanwhile wins.
func (s *Supervisor) StartAtBoot(ctx context.Context) error {
	list, err := s.containers.List(ctx, core.ListContainersOptions{All: true})
	if err != nil {
		return err
	}
	var due []string
	for _, row := range list {
		c, err := s.containers.Lookup(ctx, row.ID)
		if err != nil {
			continue
		}
		if CutStart(c) {
			due = append(due, c.ID)
			continue
		}
		if !Decide(c) {
			continue
		}
		switch ForContainer(c).Name {
		case Always, UnlessStopped:
			due = append(due, c.ID)
		case OnFailure:
			s.Hook(ctx, core.ContainerEvent{Type: core.EventDied, ID: c.ID})
		}
	}
	if len(due) == 0 {
		return nil
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for _, id := range due {
			if s.ctx.Err() != nil {
				return
			}
			due := func(c *core.Container) bool { return Decide(c) || CutStart(c) }
			if _, err := s.containers.StartByPolicy(s.ctx, id, due, false); err != nil && !errors.Is(err, core.ErrNotModified) && !errors.Is(err, core.ErrNoSuchContainer) {
				s.logger.Error("starting container at engine start", "container", id, "err", err)
			}
		}
	}()
	return nil
}

// Close stops pending restarts and waits for running ones.
func (s *Supervisor) Close() {
	s.cancel()
	s.wg.Wait()
}
