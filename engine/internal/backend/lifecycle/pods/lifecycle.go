package pods

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/berth-project/berth/engine/internal/backend/lifecycle/containers"
	"github.com/berth-project/berth/engine/internal/backend/lifecycle/restart"
	"github.com/berth-project/berth/engine/internal/core"
)

// withEntry looks a pod up and runs fn under its operation lock, with a
// context the client's leaving cannot cancel halfway through.
func withEntry[T any](ctx context.Context, m *Manager, nameOrID string, fn func(ctx context.Context, e *entry) (T, error)) (T, error) {
	ctx = context.WithoutCancel(ctx)
	e, err := m.lookup(nameOrID)
	if err != nil {
		var none T
		return none, err
	}
	e.op.Lock()
	defer e.op.Unlock()
	return fn(ctx, e)
}

// locked looks a pod up and runs fn under its operation lock with the pod's
// record and its containers split into the infra container and the others.
func (m *Manager) locked(ctx context.Context, nameOrID string, fn func(ctx context.Context, pod core.Pod, infra *core.PodMember, others []core.PodMember) (*core.PodActionReport, error)) (*core.PodActionReport, error) {
	return withEntry(ctx, m, nameOrID, func(ctx context.Context, e *entry) (*core.PodActionReport, error) {
		pod := m.snapshot(e)
		infra, others := m.split(pod.ID)
		return fn(ctx, pod, infra, others)
	})
}

// split returns a pod's infra container (nil when it has none) and its
// other containers.
func (m *Manager) split(podID string) (*core.PodMember, []core.PodMember) {
	var infra *core.PodMember
	var others []core.PodMember
	for _, c := range m.o.Members.PodMembers()[podID] {
		if c.IsInfra {
			c := c
			infra = &c
			continue
		}
		others = append(others, c)
	}
	return infra, others
}

// each runs op on every container of ctrs concurrently and returns one
// message per failure, prefixed by verb and the container's ID. Errors
// matched by ignore are not failures.
func each(ctrs []core.PodMember, verb string, op func(id string) error, ignore func(error) bool) []string {
	var mu sync.Mutex
	var errs []string
	var wg sync.WaitGroup
	for _, c := range ctrs {
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			if err := op(id); err != nil && !ignore(err) {
				mu.Lock()
				errs = append(errs, fmt.Sprintf("%s container %s: %v", verb, id, err))
				mu.Unlock()
			}
		}(c.ID)
	}
	wg.Wait()
	return errs
}

func notModified(err error) bool { return errors.Is(err, core.ErrNotModified) }

func all(states ...core.ContainerState) func([]core.PodMember) []core.PodMember {
	return func(ctrs []core.PodMember) []core.PodMember {
		var out []core.PodMember
		for _, c := range ctrs {
			for _, s := range states {
				if c.State == s {
					out = append(out, c)
					break
				}
			}
		}
		return out
	}
}

var (
	runningOrPaused = all(core.StateRunning, core.StatePaused)
	runningOnly     = all(core.StateRunning)
	pausedOnly      = all(core.StatePaused)
)

func withInfra(infra *core.PodMember, others []core.PodMember) []core.PodMember {
	if infra == nil {
		return others
	}
	return append([]core.PodMember{*infra}, others...)
}

// Start starts the infra container, then the other containers together.
func (m *Manager) Start(ctx context.Context, nameOrID string) (*core.PodActionReport, error) {
	return m.locked(ctx, nameOrID, func(ctx context.Context, pod core.Pod, infra *core.PodMember, others []core.PodMember) (*core.PodActionReport, error) {
		if Status(statesOf(withInfra(infra, others))) == core.PodStateRunning {
			return nil, fmt.Errorf("pod %s is already running: %w", pod.Name, core.ErrNotModified)
		}
		return m.startLocked(ctx, pod, infra, others), nil
	})
}

func (m *Manager) startLocked(ctx context.Context, pod core.Pod, infra *core.PodMember, others []core.PodMember) *core.PodActionReport {
	report := &core.PodActionReport{ID: pod.ID}
	if infra != nil {
		if err := m.o.Containers.Start(ctx, infra.ID); err != nil && !notModified(err) {
			report.Errs = append(report.Errs, fmt.Sprintf("starting container %s: %v", infra.ID, err))
			for _, c := range others {
				report.Errs = append(report.Errs, fmt.Sprintf("starting container %s: a dependency of container %s failed to start: %v", c.ID, c.ID, core.ErrContainerStateImproper))
			}
			return report
		}
	}
	inits, regular := splitInit(others)
	for i, c := range inits {
		if err := m.runInit(ctx, c); err != nil {
			report.Errs = append(report.Errs, fmt.Sprintf("starting init container %s: %v", c.ID, err))
			for _, rest := range append(inits[i+1:len(inits):len(inits)], regular...) {
				report.Errs = append(report.Errs, fmt.Sprintf("starting container %s: an init container of the pod failed: %v", rest.ID, core.ErrContainerStateImproper))
			}
			return report
		}
	}
	report.Errs = append(report.Errs, each(regular, "starting", func(id string) error { return m.o.Containers.Start(ctx, id) }, notModified)...)
	m.o.Events(ctx, "start", pod.ID, pod.Name)
	return report
}

// splitInit separates a pod's init containers (oldest first, the order
// they run in) from its regular members.
func splitInit(members []core.PodMember) (inits, regular []core.PodMember) {
	for _, c := range members {
		if c.InitType != "" {
			inits = append(inits, c)
		} else {
			regular = append(regular, c)
		}
	}
	return inits, regular
}

// runInit runs an init container to completion, as Podman does before a
// pod's other members start: a non-zero exit fails the pod's start, and a
// "once" container that succeeded is removed so that it never runs again.
func (m *Manager) runInit(ctx context.Context, c core.PodMember) error {
	if err := m.o.Containers.Start(ctx, c.ID); err != nil && !notModified(err) {
		return err
	}
	code, err := m.o.Containers.Wait(ctx, c.ID, nil)
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("init container %s exited with code %d", c.Name, code)
	}
	if c.InitType == core.InitContainerOnce {
		if err := m.o.Containers.Remove(ctx, c.ID, core.RemoveContainerOptions{Force: true}); err != nil && !errors.Is(err, core.ErrNoSuchContainer) {
			return fmt.Errorf("removing once init container %s: %w", c.Name, err)
		}
	}
	return nil
}

// Stop stops the other containers together, then the infra container.
func (m *Manager) Stop(ctx context.Context, nameOrID string, timeout *uint) (*core.PodActionReport, error) {
	return m.locked(ctx, nameOrID, func(ctx context.Context, pod core.Pod, infra *core.PodMember, others []core.PodMember) (*core.PodActionReport, error) {
		if len(runningOrPaused(withInfra(infra, others))) == 0 {
			return nil, fmt.Errorf("pod %s is not running: %w", pod.Name, core.ErrNotModified)
		}
		return m.stopLocked(ctx, pod, infra, others, timeout), nil
	})
}

func (m *Manager) stopLocked(ctx context.Context, pod core.Pod, infra *core.PodMember, others []core.PodMember, timeout *uint) *core.PodActionReport {
	report := &core.PodActionReport{ID: pod.ID}
	stop := func(id string) error { return m.o.Containers.Stop(ctx, id, timeout) }
	report.Errs = append(report.Errs, each(runningOrPaused(others), "stopping", stop, notModified)...)
	if infra != nil {
		report.Errs = append(report.Errs, each([]core.PodMember{*infra}, "stopping", stop, notModified)...)
	}
	m.o.Events(ctx, "stop", pod.ID, pod.Name)
	return report
}

// Restart stops what runs, then starts the pod again.
func (m *Manager) Restart(ctx context.Context, nameOrID string, timeout *uint) (*core.PodActionReport, error) {
	return m.locked(ctx, nameOrID, func(ctx context.Context, pod core.Pod, infra *core.PodMember, others []core.PodMember) (*core.PodActionReport, error) {
		report := &core.PodActionReport{ID: pod.ID}
		if len(runningOrPaused(withInfra(infra, others))) > 0 {
			report.Errs = m.stopLocked(ctx, pod, infra, others, timeout).Errs
			if len(report.Errs) > 0 {
				return report, nil
			}
		}
		report.Errs = m.startLocked(ctx, pod, infra, others).Errs
		return report, nil
	})
}

// Kill signals every running container of the pod.
func (m *Manager) Kill(ctx context.Context, nameOrID, signal string) (*core.PodActionReport, error) {
	if _, err := containers.ParseSignal(signal); err != nil {
		return nil, core.InvalidArgument("signal", err)
	}
	return m.locked(ctx, nameOrID, func(ctx context.Context, pod core.Pod, infra *core.PodMember, others []core.PodMember) (*core.PodActionReport, error) {
		if len(runningOnly(withInfra(infra, others))) == 0 {
			return nil, fmt.Errorf("cannot kill a pod with no running containers: %s: %w", pod.ID, core.ErrStateConflict)
		}
		// The members first, then the infra container: with a shared PID
		// namespace its end takes every member with it. A container that
		// exited meanwhile is not a failure.
		kill := func(id string) error { return m.o.Containers.Kill(ctx, id, signal) }
		gone := func(err error) bool {
			return errors.Is(err, core.ErrStateConflict) || errors.Is(err, core.ErrNoSuchContainer)
		}
		report := &core.PodActionReport{ID: pod.ID}
		report.Errs = each(runningOnly(others), "killing", kill, gone)
		if infra != nil && infra.State == core.StateRunning {
			report.Errs = append(report.Errs, each([]core.PodMember{*infra}, "killing", kill, gone)...)
		}
		m.o.Events(ctx, "kill", pod.ID, pod.Name)
		return report, nil
	})
}

// Pause freezes every running container of the pod.
func (m *Manager) Pause(ctx context.Context, nameOrID string) (*core.PodActionReport, error) {
	return m.eachMember(ctx, nameOrID, runningOnly, "pausing", "pause", m.o.Containers.Pause)
}

// Unpause thaws every paused container of the pod.
func (m *Manager) Unpause(ctx context.Context, nameOrID string) (*core.PodActionReport, error) {
	return m.eachMember(ctx, nameOrID, pausedOnly, "unpausing", "unpause", m.o.Containers.Unpause)
}

// eachMember runs op on the pod's containers, infra included, that pick
// keeps, all at once (one already in the wanted state is no failure), and
// records the pod event.
func (m *Manager) eachMember(ctx context.Context, nameOrID string, pick func([]core.PodMember) []core.PodMember, verb, event string, op func(ctx context.Context, id string) error) (*core.PodActionReport, error) {
	return m.locked(ctx, nameOrID, func(ctx context.Context, pod core.Pod, infra *core.PodMember, others []core.PodMember) (*core.PodActionReport, error) {
		report := &core.PodActionReport{ID: pod.ID}
		report.Errs = each(pick(withInfra(infra, others)), verb, func(id string) error { return op(ctx, id) }, notModified)
		m.o.Events(ctx, event, pod.ID, pod.Name)
		return report, nil
	})
}

// onContainerEvent applies the stop exit policy: when the last running
// member of such a pod exits, the infra container is stopped too.
func (m *Manager) onContainerEvent(ctx context.Context, ev core.ContainerEvent) {
	if ev.Type != core.EventDied {
		return
	}
	podID := ev.Attributes["podId"]
	if podID == "" {
		return
	}
	m.mu.RLock()
	e, ok := m.byID[podID]
	stopPolicy := ok && e.rec.Spec.ExitPolicy == core.PodExitPolicyStop && e.rec.InfraID != "" && e.rec.InfraID != ev.ID
	m.mu.RUnlock()
	if !stopPolicy {
		return
	}
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		// A member that a restart under way starts again (its died came
		// from the restart's stop), or that its restart policy brings
		// back, has not exited for good: stopping the infra container
		// now would pull the namespaces from under its next run. The
		// member's operation is waited for before the pod's lock, which
		// its start may take.
		m.o.Members.Settle(ev.ID)
		if m.comesBack(ctx, ev.ID) {
			return
		}
		e.op.Lock()
		defer e.op.Unlock()
		infra, others := m.split(podID)
		_, others = splitInit(others)
		if infra == nil || len(others) == 0 || len(runningOrPaused(others)) > 0 {
			return
		}
		for _, o := range others {
			if m.comesBack(ctx, o.ID) {
				return
			}
		}
		if len(runningOrPaused([]core.PodMember{*infra})) == 0 {
			return
		}
		pod := m.snapshot(e)
		if err := m.o.Containers.Stop(context.WithoutCancel(ctx), infra.ID, nil); err != nil && !notModified(err) {
			m.logger.Warn("exit policy stop: stopping the infra container", "pod", podID, "err", err)
			return
		}
		m.o.Events(ctx, "stop", pod.ID, pod.Name)
	}()
}

// comesBack tells whether a pod member runs or is paused, or has exited
// but its restart policy starts it again.
func (m *Manager) comesBack(ctx context.Context, id string) bool {
	c, err := m.o.Containers.Lookup(context.WithoutCancel(ctx), id)
	return err == nil && (c.State == core.StateRunning || c.State == core.StatePaused || restart.Decide(c))
}
