package containers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-project/berth/engine/internal/backend/execution/cgroups"
	"github.com/berth-project/berth/engine/internal/backend/execution/runtime"
	"github.com/berth-project/berth/engine/internal/core"
)

// exitPollInterval bounds how long an exit can go unnoticed should an
// inotify event be lost; normally the exit-file watch reports it at once.
const exitPollInterval = 200 * time.Millisecond

// conmonExitTimeout bounds the wait for a conmon to exit after its container
// did (it writes the exit file first); then it is killed.
const conmonExitTimeout = 10 * time.Second

// Start starts a container, creating it in the runtime first when needed.
func (m *Manager) Start(ctx context.Context, nameOrID string) error {
	return m.observedLocked(ctx, "start", nameOrID, m.startLocked)
}

// StartByPolicy starts a container when want holds for it under its
// operation lock (core.Containers). The restart supervisor decided from a
// snapshot taken before its backoff; a client's restart and checkpoint in
// between would otherwise be followed by the policy's start of a container
// the checkpoint had just stopped (found by the chaos loop: a restore
// refused, "container is running").
func (m *Manager) StartByPolicy(ctx context.Context, nameOrID string, want func(*core.Container) bool, countRestart bool) (bool, error) {
	started := false
	err := m.observedLocked(ctx, "start", nameOrID, func(ctx context.Context, e *entry) error {
		rec := m.snapshot(e)
		if !want(&rec.Container) {
			return nil
		}
		if countRestart {
			if err := m.update(ctx, e, func(r *record) { r.RestartCount++ }); err != nil {
				return err
			}
		}
		if err := m.startLocked(ctx, e); err != nil {
			return err
		}
		started = true
		return nil
	})
	return started, err
}

// observedLocked looks a container up and runs fn under its operation lock,
// recording how long it took as operation op.
func (m *Manager) observedLocked(ctx context.Context, op, nameOrID string, fn func(context.Context, *entry) error) error {
	// A client that goes away must not leave a change half done.
	ctx = context.WithoutCancel(ctx)
	defer m.metrics.observe(op, time.Now())
	e, err := m.lookup(nameOrID)
	if err != nil {
		return err
	}
	e.op.Lock()
	defer e.op.Unlock()
	if m.isRemoved(e) {
		// Removed while this waited for the removal's lock: a start of
		// it (a restart policy's) would create what nothing removes.
		return core.NoSuchContainer(nameOrID)
	}
	return fn(ctx, e)
}

func (m *Manager) startLocked(ctx context.Context, e *entry) error {
	rec := m.snapshot(e)
	switch rec.State {
	case core.StateRunning:
		return fmt.Errorf("container %s is already running: %w", rec.Name, core.ErrNotModified)
	case core.StatePaused:
		return fmt.Errorf("container %s is paused, unpause it instead: %w", rec.Name, core.ErrStateConflict)
	case core.StateExited, core.StateStopped:
		m.cleanupLocked(ctx, e)
		fallthrough
	case core.StateConfigured:
		if err := m.initLocked(ctx, e, true); err != nil {
			return err
		}
	case core.StateCreated:
	default:
		return fmt.Errorf("container %s is %s: %w", rec.Name, rec.State, core.ErrStateConflict)
	}
	m.watchOOM(e)
	started := time.Now()
	// Until the start is recorded, an exit the watch reports is left for
	// the check below, so that it is recorded after the start (the died
	// event after the start event, with the time it ran): a process that
	// exits at once was seen to die before it started, on a busy machine.
	e.starting.Store(true)
	err := m.rt.Start(ctx, rec.ID)
	if err == nil {
		m.update(ctx, e, func(r *record) {
			r.StartedAt = started
			r.StoppedByUser = false
			r.StartPending = false
			if r.State == core.StateCreated {
				r.State = core.StateRunning
			}
		})
		m.emit(ctx, core.EventStart, m.snapshot(e), nil)
	}
	e.starting.Store(false)
	// The process may have exited before the state said running (runc
	// start fails when it is gone already).
	m.handleExit(ctx, e)
	if err != nil {
		return fmt.Errorf("start container %s: %w", rec.Name, err)
	}
	return nil
}

// onExit is called by the exit-file watch.
func (m *Manager) onExit(id string) {
	if id == "" {
		m.mu.RLock()
		var all []*entry
		for _, e := range m.byID {
			all = append(all, e)
		}
		m.mu.RUnlock()
		for _, e := range all {
			m.exited(e)
		}
		return
	}
	m.mu.RLock()
	e := m.byID[id]
	m.mu.RUnlock()
	if e != nil {
		m.exited(e)
	}
}

// exited records an exit (if there is one); handleExit schedules the
// cleanup.
func (m *Manager) exited(e *entry) {
	m.handleExit(m.ctx, e)
}

// cleanupAfterExit releases an exited container's runtime state and mount
// and auto-removes it, in the background once the current operation on it
// is done. Whoever records an exit calls it (the exit watch, a Wait or Stop
// polling, a Start that finds the process gone already), so the cleanup does
// not depend on which of them saw the exit first. Running it twice is
// harmless: both steps check the container's state.
func (m *Manager) cleanupAfterExit(e *entry) {
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		e.op.Lock()
		defer e.op.Unlock()
		if m.isRemoved(e) {
			return
		}
		m.cleanupLocked(m.ctx, e)
		m.afterExitLocked(m.ctx, e)
	}()
}

// handleExit reads the container's exit file; when the container has exited
// and the record does not know yet, it records the exit code and emits the
// died event. It reports whether an exit was recorded now.
func (m *Manager) handleExit(ctx context.Context, e *entry) bool {
	if e.starting.Load() {
		// The start records it (startLocked).
		return false
	}
	rec := m.snapshot(e)
	if rec.State != core.StateCreated && rec.State != core.StateRunning && rec.State != core.StatePaused {
		return false
	}
	code, at, ok, err := m.rt.ReadExit(rec.ID)
	if err != nil {
		m.logger.Warn("read exit file", "container", rec.ID, "err", err)
		return false
	}
	if !ok {
		return false
	}
	oom := m.oomKilled(rec) || e.oomSeenAfterKill(code) || m.oomKillLogged(rec, code)
	recorded := false
	m.update(ctx, e, func(r *record) {
		if r.State != core.StateCreated && r.State != core.StateRunning && r.State != core.StatePaused {
			return
		}
		r.State = core.StateExited
		r.ExitCode = code
		r.OOMKilled = oom
		r.FinishedAt = at
		r.PID = 0
		recorded = true
	})
	if recorded {
		if oom {
			m.emit(ctx, core.EventOOM, m.snapshot(e), nil)
		}
		m.emit(ctx, core.EventDied, m.snapshot(e), nil)
		m.cleanupAfterExit(e)
	}
	return recorded
}

// oomKilled reports whether the OOM killer killed a process of the
// container: its cgroup counts the kills (memory.events on v2,
// memory.oom_control on v1) and is still there when the exit is recorded
// (the runtime's delete comes after). Containers in a pod count the kills
// in their own cgroup, whichever limit (theirs or the pod's) was hit.
//
// Under the systemd manager the scope's cgroup may be gone already: systemd
// stops a scope as soon as it is empty. conmon watches the same counter
// while the container runs and leaves an "oom" file in the bundle (its
// working directory) when it moves; that file counts too (the runtime's
// Create removes it before each run).
func (m *Manager) oomKilled(rec record) bool {
	if rec.CgroupPath == "" || rec.PauseProcess {
		return false
	}
	if n, ok := cgroups.Host().OOMKills(rec.CgroupPath); ok && n > 0 {
		return true
	}
	_, err := os.Stat(filepath.Join(rec.Bundle, "oom"))
	return rec.Bundle != "" && err == nil
}

// pollExit is the slow path of exit detection: the exit file, and failing
// that, whether the container's process and its conmon are both gone (conmon
// killed, so no exit file will ever come).
func (m *Manager) pollExit(ctx context.Context, e *entry) {
	if m.handleExit(ctx, e) {
		return
	}
	rec := m.snapshot(e)
	if rec.State != core.StateRunning && rec.State != core.StatePaused && rec.State != core.StateCreated {
		return
	}
	if runtime.ProcessAlive(rec.PID) || runtime.ProcessAlive(rec.ConmonPID) || m.rt.ExitPending(rec.ID) {
		return
	}
	if _, _, ok, _ := m.rt.ReadExit(rec.ID); ok {
		m.handleExit(ctx, e)
		return
	}
	recorded := false
	m.update(ctx, e, func(r *record) {
		if r.State == core.StateRunning || r.State == core.StatePaused || r.State == core.StateCreated {
			r.State = core.StateExited
			r.ExitCode = -1
			r.PID = 0
			r.FinishedAt = time.Now()
			r.Error = "conmon exited without recording the container's exit code"
			recorded = true
		}
	})
	if recorded {
		m.emit(ctx, core.EventDied, m.snapshot(e), nil)
		m.cleanupAfterExit(e)
	}
}

// cleanupLocked releases the runtime state, the rootfs mount and conmon's
// files of an exited container. It is idempotent. The caller holds e.op.
func (m *Manager) cleanupLocked(ctx context.Context, e *entry) {
	rec := m.snapshot(e)
	if !rec.NeedsCleanup && (!rec.Mounted || rec.UserMounts > 0) && rec.NetSetup == nil {
		return
	}
	if rec.State == core.StateCreated || rec.State == core.StateRunning || rec.State == core.StatePaused {
		// Started again since the exit that asked for this cleanup.
		return
	}
	ctx = context.WithoutCancel(ctx)
	if rec.NeedsCleanup {
		if err := m.rt.DeleteExited(ctx, rec.ID); err != nil {
			m.logger.Warn("delete container from runtime", "container", rec.ID, "err", err)
		}
		m.rt.Cleanup(rec.ID)
	}
	m.teardownNetworkLocked(ctx, e)
	if !runtime.WaitConmonExit(rec.ConmonPID, rec.ID, conmonExitTimeout) {
		m.logger.Warn("conmon did not exit after its container; killed it", "container", rec.ID, "pid", rec.ConmonPID)
	}
	// systemd's jobs that stop the scopes run while the mounts go.
	released := make(chan struct{})
	go func() {
		defer close(released)
		m.releaseSystemdUnits(ctx, &rec)
	}()
	m.unmountVolumes(ctx, &rec)
	unmountPerRun(rec.StaticDir)
	unmount := rec.Mounted && rec.UserMounts == 0 && !m.copyHeld(e)
	if unmount {
		if err := m.unmountRoot(rec.ID, &rec.Spec); err != nil {
			m.logger.Warn("unmount container", "container", rec.ID, "err", err)
		} else {
			m.unmountLayerLeftovers(rec.ID)
		}
	}
	<-released
	m.update(ctx, e, func(r *record) {
		r.NeedsCleanup = false
		if unmount {
			r.Mounted = false
			r.Rootfs = ""
		}
		r.ConmonPID = 0
	})
	m.emit(ctx, core.EventCleanup, m.snapshot(e), nil)
}

// afterExitLocked removes an exited auto-remove container.
func (m *Manager) afterExitLocked(ctx context.Context, e *entry) {
	rec := m.snapshot(e)
	if rec.Spec.Remove && (rec.State == core.StateExited || rec.State == core.StateStopped) {
		if err := m.removeLocked(ctx, e, core.RemoveContainerOptions{Force: true, Volumes: true}); err != nil {
			m.logger.Warn("auto-remove container", "container", rec.ID, "err", err)
		}
	}
}

// waitExit blocks until the container is no longer running, created or
// paused, or until the deadline; it reports whether it exited.
func (m *Manager) waitExit(ctx context.Context, e *entry, deadline time.Time) bool {
	for {
		m.mu.RLock()
		st := e.rec.State
		ch := e.changed
		m.mu.RUnlock()
		if st != core.StateRunning && st != core.StateCreated && st != core.StatePaused {
			return true
		}
		wait := exitPollInterval
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return false
			}
			wait = min(wait, left)
		}
		if !m.awaitChange(ctx, e, ch, wait) {
			return false
		}
	}
}

// awaitChange waits up to d for ch to close, polling the container's exit
// when d passes first; it reports false when ctx ends first.
func (m *Manager) awaitChange(ctx context.Context, e *entry, ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
		m.pollExit(ctx, e)
	case <-ctx.Done():
		return false
	}
	return true
}

// Stop stops a running container: stop signal, timeout, then SIGKILL.
func (m *Manager) Stop(ctx context.Context, nameOrID string, timeout *uint) error {
	return m.StopWithSignal(ctx, nameOrID, timeout, "")
}

// StopWithSignal is Stop with signal ("" for the container's stop signal).
func (m *Manager) StopWithSignal(ctx context.Context, nameOrID string, timeout *uint, signal string) error {
	sig, err := optionalSignal(signal)
	if err != nil {
		return err
	}
	return m.observedLocked(ctx, "stop", nameOrID, func(ctx context.Context, e *entry) error {
		return m.stopLocked(ctx, e, timeout, sig)
	})
}

// optionalSignal reads a stop request's signal: 0 for none given.
func optionalSignal(signal string) (syscall.Signal, error) {
	if signal == "" {
		return 0, nil
	}
	sig, err := ParseSignal(signal)
	if err != nil {
		return 0, core.InvalidArgument("signal", err)
	}
	return sig, nil
}

// stopLocked stops the container with sig, or its stop signal where sig is 0.
func (m *Manager) stopLocked(ctx context.Context, e *entry, timeout *uint, sig syscall.Signal) error {
	rec := m.snapshot(e)
	if rec.State != core.StateRunning && rec.State != core.StatePaused && rec.State != core.StateCreated {
		// Not running, but perhaps between two runs of its restart policy
		// (the backoff after an exit): the user's stop wins, and the
		// pending restart does not start it (as dockerd stops a
		// restarting container). Still 304: there was nothing to stop.
		if !rec.StoppedByUser && rec.Spec.RestartPolicy != "" && rec.Spec.RestartPolicy != "no" {
			if err := m.update(ctx, e, func(r *record) { r.StoppedByUser = true }); err != nil {
				return err
			}
		}
		return fmt.Errorf("container %s is not running: %w", rec.Name, core.ErrNotModified)
	}
	if err := m.update(ctx, e, func(r *record) { r.StoppedByUser = true }); err != nil {
		return err
	}
	t := uint(defaultStopTimeout)
	if rec.Spec.StopTimeout != nil {
		t = *rec.Spec.StopTimeout
	}
	if timeout != nil {
		t = *timeout
	}
	if sig == 0 {
		sig = m.stopSignal(rec)
	}
	if t > 0 && rec.State != core.StateCreated {
		m.emitStopKill(ctx, rec, sig)
		if err := m.rt.Kill(ctx, rec.ID, sig, false); err != nil && !m.goneOrExited(ctx, e) {
			return fmt.Errorf("stop container %s: %w", rec.Name, err)
		}
		if rec.State == core.StatePaused {
			m.rt.Resume(ctx, rec.ID)
		}
		if m.waitExit(ctx, e, time.Now().Add(time.Duration(t)*time.Second)) {
			m.finishStop(ctx, e)
			return nil
		}
	}
	if rec.State != core.StateCreated {
		m.emitStopKill(ctx, rec, syscall.SIGKILL)
	}
	if err := m.rt.Kill(ctx, rec.ID, syscall.SIGKILL, true); err != nil && !m.goneOrExited(ctx, e) {
		return fmt.Errorf("kill container %s: %w", rec.Name, err)
	}
	if rec.State == core.StatePaused {
		m.rt.Resume(ctx, rec.ID)
	}
	if !m.waitExit(ctx, e, time.Time{}) {
		return fmt.Errorf("container %s did not exit: %w", rec.Name, ctx.Err())
	}
	m.finishStop(ctx, e)
	return nil
}

// emitStopKill records the signal a stop sends as dockerd does, a kill
// event with the signal's number, before the die and the stop (recorded
// before the signal goes, so the die cannot come first); Podman records
// none, and the libpod stream leaves it out.
func (m *Manager) emitStopKill(ctx context.Context, rec record, sig syscall.Signal) {
	m.emitDockerOnly(ctx, core.EventKill, rec, map[string]string{"signal": strconv.Itoa(int(sig))})
}

func (m *Manager) finishStop(ctx context.Context, e *entry) {
	m.cleanupLocked(ctx, e)
	m.emit(ctx, core.EventStop, m.snapshot(e), nil)
	m.afterExitLocked(ctx, e)
}

// goneOrExited tells whether a failed signal is explained by the container
// having exited meanwhile.
func (m *Manager) goneOrExited(ctx context.Context, e *entry) bool {
	m.handleExit(ctx, e)
	st, err := m.rt.State(ctx, m.snapshot(e).ID)
	return errors.Is(err, runtime.ErrNotExist) || (err == nil && st.Status == "stopped")
}

func (m *Manager) stopSignal(rec record) syscall.Signal {
	if rec.Spec.StopSignal != nil {
		return syscall.Signal(*rec.Spec.StopSignal)
	}
	if rec.ImageStopSignal != "" {
		if s, err := ParseSignal(rec.ImageStopSignal); err == nil {
			return s
		}
	}
	return syscall.SIGTERM
}

// ParseSignal reads a signal name ("KILL", "SIGKILL", "sigkill") or number.
func ParseSignal(s string) (syscall.Signal, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return syscall.SIGKILL, nil
	}
	if n, err := strconv.Atoi(s); err == nil {
		if n < 1 || n > 64 {
			return 0, core.InvalidArgument("signal", fmt.Errorf("%d is not a signal number", n))
		}
		return syscall.Signal(n), nil
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	if strings.HasPrefix(name, "SIGRTMIN") || strings.HasPrefix(name, "SIGRTMAX") {
		base, rest := 34, strings.TrimPrefix(name, "SIGRTMIN")
		if strings.HasPrefix(name, "SIGRTMAX") {
			base, rest = 64, strings.TrimPrefix(name, "SIGRTMAX")
		}
		off := 0
		if rest != "" {
			v, err := strconv.Atoi(rest)
			if err != nil {
				return 0, core.InvalidArgument("signal", fmt.Errorf("unknown signal %q", s))
			}
			off = v
		}
		if n := base + off; n >= 34 && n <= 64 {
			return syscall.Signal(n), nil
		}
	}
	return 0, core.InvalidArgument("signal", fmt.Errorf("unknown signal %q", s))
}

// Kill sends a signal to a running container.
func (m *Manager) Kill(ctx context.Context, nameOrID, signal string) error {
	// A client that goes away must not leave a change half done.
	ctx = context.WithoutCancel(ctx)
	sig, err := ParseSignal(signal)
	if err != nil {
		return err
	}
	e, rec, unlock, err := m.lockedLookup(nameOrID)
	if err != nil {
		return err
	}
	defer unlock()
	if rec.State != core.StateRunning && rec.State != core.StatePaused {
		return fmt.Errorf("container %s is not running: %w", rec.Name, core.ErrStateConflict)
	}
	if sig == syscall.SIGKILL || sig == syscall.SIGTERM {
		m.update(ctx, e, func(r *record) { r.StoppedByUser = true })
	}
	if err := m.rt.Kill(ctx, rec.ID, sig, false); err != nil {
		if m.goneOrExited(ctx, e) {
			return fmt.Errorf("container %s is not running: %w", rec.Name, core.ErrStateConflict)
		}
		return fmt.Errorf("kill container %s: %w", rec.Name, err)
	}
	m.emit(ctx, core.EventKill, rec, map[string]string{"signal": strconv.Itoa(int(sig))})
	return nil
}

// Restart stops a running container and starts it again.
func (m *Manager) Restart(ctx context.Context, nameOrID string, timeout *uint) error {
	return m.RestartWithSignal(ctx, nameOrID, timeout, "")
}

// RestartWithSignal is Restart with signal ("" for the container's stop
// signal) for the stop.
func (m *Manager) RestartWithSignal(ctx context.Context, nameOrID string, timeout *uint, signal string) error {
	sig, err := optionalSignal(signal)
	if err != nil {
		return err
	}
	// A client that goes away must not leave a change half done.
	ctx = context.WithoutCancel(ctx)
	e, rec, unlock, err := m.lockedLookup(nameOrID)
	if err != nil {
		return err
	}
	defer unlock()
	if rec.State == core.StateRunning || rec.State == core.StatePaused {
		if err := m.stopLocked(ctx, e, timeout, sig); err != nil && !errors.Is(err, core.ErrNotModified) {
			return err
		}
	}
	if m.snapshot(e).Spec.Remove && m.isRemoved(e) {
		return fmt.Errorf("container %s was removed when it stopped: %w", rec.Name, core.ErrNoSuchContainer)
	}
	if err := m.startLocked(ctx, e); err != nil {
		return err
	}
	m.emit(ctx, core.EventRestart, m.snapshot(e), nil)
	return nil
}

// lockedLookup finds a container, takes its operation lock and copies its
// record; the caller releases the lock with unlock.
func (m *Manager) lockedLookup(nameOrID string) (e *entry, rec record, unlock func(), err error) {
	e, err = m.lookup(nameOrID)
	if err != nil {
		return nil, record{}, nil, err
	}
	e.op.Lock()
	if m.isRemoved(e) {
		// Removed while this waited for the removal's lock.
		e.op.Unlock()
		return nil, record{}, nil, core.NoSuchContainer(nameOrID)
	}
	return e, m.snapshot(e), e.op.Unlock, nil
}

func (m *Manager) isRemoved(e *entry) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return e.removed
}

// Pause freezes a running container.
func (m *Manager) Pause(ctx context.Context, nameOrID string) error {
	return m.setFrozen(ctx, nameOrID, core.StateRunning, core.StatePaused, core.EventPause, m.rt.Pause, nil)
}

// Unpause thaws a paused container.
func (m *Manager) Unpause(ctx context.Context, nameOrID string) error {
	return m.setFrozen(ctx, nameOrID, core.StatePaused, core.StateRunning, core.EventUnpause, m.rt.Resume,
		func(ctx context.Context, e *entry) { m.handleExit(ctx, e) })
}

// setFrozen moves a container that is in state from to state to with the
// runtime operation run, emits ev and then, still under the container's
// operation lock, calls after when it is given.
func (m *Manager) setFrozen(ctx context.Context, nameOrID string, from, to core.ContainerState, ev core.ContainerEventType,
	run func(context.Context, string) error, after func(context.Context, *entry)) error {
	// A client that goes away must not leave a change half done.
	ctx = context.WithoutCancel(ctx)
	e, rec, unlock, err := m.lockedLookup(nameOrID)
	if err != nil {
		return err
	}
	defer unlock()
	if rec.NoCgroup() {
		// The freezer is a cgroup's (as Podman answers).
		return fmt.Errorf("cannot %s container %s without using cgroups: %w", ev, rec.Name, core.ErrNoCgroup)
	}
	if rec.State != from {
		return fmt.Errorf("container %s is %s, not %s: %w", rec.Name, rec.State, from, core.ErrStateConflict)
	}
	if err := run(ctx, rec.ID); err != nil {
		return fmt.Errorf("%s container %s: %w", ev, rec.Name, err)
	}
	m.update(ctx, e, func(r *record) {
		if r.State == from {
			r.State = to
		}
	})
	m.emit(ctx, ev, m.snapshot(e), nil)
	if after != nil {
		after(ctx, e)
	}
	return nil
}

// waitConditions are the conditions Wait accepts.
var waitConditions = map[string]bool{
	"configured": true, "created": true, "initialized": true, "running": true, "stopped": true,
	"paused": true, "exited": true, "removing": true, "stopping": true, "healthy": true, "unhealthy": true,
	"not-running": true, "next-exit": true,
}

// Wait blocks until the container meets one of the conditions and returns
// its exit code. No condition means "stopped or exited".
//
// Like Podman 5, the exit code of a removed container is kept for
// removedRetention: a wait without conditions on the full ID of a container
// removed a moment ago (podman run --rm racing its auto-removal) answers
// it, and a wait for the exit that is under way when the container is
// removed answers it too. Any other wait on a container that is gone is
// ErrNoSuchContainer.
func (m *Manager) Wait(ctx context.Context, nameOrID string, conditions []string) (int32, error) {
	for _, c := range conditions {
		if !waitConditions[strings.ToLower(c)] {
			return -1, core.InvalidArgument("condition", fmt.Errorf("%q is not a container state or health condition", c))
		}
	}
	anyCondition := len(conditions) == 0
	if anyCondition {
		conditions = []string{"stopped", "exited"}
	}
	e, err := m.lookup(nameOrID)
	if err != nil {
		if anyCondition && errors.Is(err, core.ErrNoSuchContainer) {
			if code, ok := m.removedExitCode(ctx, nameOrID); ok {
				return code, nil
			}
		}
		return -1, err
	}
	for {
		m.mu.RLock()
		rec := e.rec
		ch := e.changed
		removed := e.removed
		m.mu.RUnlock()
		if removed {
			if waitsForExit(conditions) {
				if code, ok := m.removedExitCode(ctx, rec.ID); ok {
					return code, nil
				}
			}
			return -1, core.NoSuchContainer(nameOrID)
		}
		for _, c := range conditions {
			if conditionMet(strings.ToLower(c), rec) {
				return rec.ExitCode, nil
			}
		}
		if !m.awaitChange(ctx, e, ch, exitPollInterval) {
			return -1, ctx.Err()
		}
	}
}

// waitsForExit reports whether one of the conditions is met by a container
// that has exited.
func waitsForExit(conditions []string) bool {
	for _, c := range conditions {
		switch strings.ToLower(c) {
		case "stopped", "exited", "not-running", "next-exit":
			return true
		}
	}
	return false
}

func conditionMet(c string, rec record) bool {
	st := rec.State
	switch c {
	case "configured":
		return st == core.StateConfigured
	case "created", "initialized":
		return st == core.StateCreated || (c == "created" && st == core.StateConfigured)
	case "running":
		return st == core.StateRunning
	case "paused":
		return st == core.StatePaused
	case "stopped", "exited", "not-running", "next-exit":
		return st == core.StateStopped || st == core.StateExited
	case "healthy", "unhealthy":
		return rec.Health.Status == c
	}
	return false
}

// removedExitCode is the exit code kept for the removed container with
// the full ID id (Podman keeps them by ID only).
func (m *Manager) removedExitCode(ctx context.Context, id string) (int32, bool) {
	exit, err := m.db.RemovedExitCode(context.WithoutCancel(ctx), id)
	if err != nil || time.Since(exit.Removed) > removedRetention {
		return 0, false
	}
	return exit.Code, true
}
