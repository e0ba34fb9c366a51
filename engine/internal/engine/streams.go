package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/execution/containerio"
	"github.com/berth-project/berth/engine/internal/backend/lifecycle/containers"
	"github.com/berth-project/berth/engine/internal/backend/lifecycle/exec"
	"github.com/berth-project/berth/engine/internal/backend/lifecycle/health"
	"github.com/berth-project/berth/engine/internal/backend/lifecycle/restart"
	"github.com/berth-project/berth/engine/internal/backend/platform/events"
	"github.com/berth-project/berth/engine/internal/backend/platform/state"
	"github.com/berth-project/berth/engine/internal/core"
)

// eventRetention is how long events are kept; older ones are pruned at
// engine start.
const eventRetention = 30 * 24 * time.Hour

// streamServices are the services built on the container manager: the
// event log, exec sessions, healthchecks, restart policies and container
// I/O (logs, attach, stats, top).
type streamServices struct {
	events      *events.Bus
	exec        *exec.Manager
	health      *health.Checker
	restarts    *restart.Supervisor
	io          *containerio.Service
	unsubscribe []func()
}

// The container manager lists its running containers for stats in one
// step (containerio looks for this method).
var _ interface {
	Running(context.Context) []*core.Container
} = (*containers.Manager)(nil)

// openStreams connects the services to the container manager's events and
// resumes what must run from engine start: healthcheck schedules, and
// containers whose restart policy is always.
func openStreams(ctx context.Context, logger *slog.Logger, db *state.DB, mgr *containers.Manager, execRetention time.Duration) (*streamServices, error) {
	bus := events.NewBus(db, logger)
	s := &streamServices{
		events:   bus,
		exec:     exec.NewManager(mgr, db, bus, logger),
		health:   health.NewChecker(mgr, bus, logger),
		restarts: restart.NewSupervisor(mgr, logger),
		io:       containerio.New(mgr, ""),
	}
	s.exec.SetRetention(execRetention)
	mgr.SetExecSessions(s.exec)
	// The event log first, so hooks that act on an event see it recorded.
	s.unsubscribe = append(s.unsubscribe,
		mgr.Subscribe(bus.ContainerHook),
		mgr.Subscribe(s.health.Hook),
		mgr.Subscribe(s.restarts.Hook),
		mgr.Subscribe(s.io.Hook),
	)
	// What the containers' reconcile found (exits while no engine ran) is
	// delivered now that every subscriber is registered, before restarts.
	mgr.ReleaseEvents(ctx)
	// The event log keeps a bounded history.
	if _, err := db.PruneEvents(ctx, time.Now().Add(-eventRetention)); err != nil {
		logger.Warn("pruning old events", "err", err)
	}
	if err := s.exec.Recover(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.health.StartAll(ctx); err != nil {
		logger.Warn("scheduling healthchecks", "err", err)
	}
	if err := s.restarts.StartAtBoot(ctx); err != nil {
		logger.Warn("starting containers with restart policy always", "err", err)
	}
	return s, nil
}

// Close stops schedules and pending restarts; containers keep running.
func (s *streamServices) Close() {
	for _, u := range s.unsubscribe {
		u()
	}
	s.health.Close()
	s.restarts.Close()
}
