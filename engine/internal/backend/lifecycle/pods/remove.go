package pods

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/berth-project/berth/engine/internal/backend/platform/state"
	"github.com/berth-project/berth/engine/internal/core"
)

// Remove removes a pod: its containers, then its infra container, its
// cgroup and its record. Without Force, running or paused containers make
// it a state conflict and nothing is removed.
func (m *Manager) Remove(ctx context.Context, nameOrID string, opts core.RemovePodOptions) (*core.PodRmReport, error) {
	return withEntry(ctx, m, nameOrID, func(ctx context.Context, e *entry) (*core.PodRmReport, error) {
		return m.removeLocked(ctx, e, opts)
	})
}

func (m *Manager) removeLocked(ctx context.Context, e *entry, opts core.RemovePodOptions) (*core.PodRmReport, error) {
	m.mu.RLock()
	gone := e.removing
	m.mu.RUnlock()
	if gone {
		return nil, core.NoSuchPod(e.rec.ID)
	}
	pod := m.snapshot(e)
	infra, others := m.split(pod.ID)
	// A forced removal stops each container as it removes it: the others
	// together first, the infra container last.
	if active := runningOrPaused(withInfra(infra, others)); len(active) > 0 && !opts.Force {
		return nil, fmt.Errorf("pod %s has containers that are not ready to be removed: %d running or paused (force removes them): %w", pod.ID, len(active), core.ErrStateConflict)
	}
	// New containers can no longer join while the members go.
	m.mu.Lock()
	e.removing = true
	m.mu.Unlock()
	undo := func() {
		m.mu.Lock()
		e.removing = false
		m.mu.Unlock()
	}
	rm := func(id string) error {
		err := m.o.Containers.Remove(ctx, id, core.RemoveContainerOptions{Force: true, WithPod: true, Timeout: opts.Timeout})
		if errors.Is(err, core.ErrNoSuchContainer) {
			return nil
		}
		return err
	}
	if errs := each(others, "removing", rm, func(error) bool { return false }); len(errs) > 0 {
		undo()
		return nil, fmt.Errorf("removing pod %s: %s", pod.ID, strings.Join(errs, "; "))
	}
	if infra != nil {
		if err := rm(infra.ID); err != nil {
			undo()
			return nil, fmt.Errorf("removing pod %s: infra container %s: %w", pod.ID, infra.ID, err)
		}
	}
	if pod.CgroupPath != "" {
		m.dropPodCgroup(pod)
	}
	if err := m.o.DB.RemovePod(ctx, pod.ID); err != nil && !errors.Is(err, state.ErrNotFound) {
		undo()
		return nil, err
	}
	m.mu.Lock()
	delete(m.byID, pod.ID)
	if m.byName[pod.Name] == e {
		delete(m.byName, pod.Name)
	}
	m.mu.Unlock()
	m.o.Events(ctx, "remove", pod.ID, pod.Name)
	return &core.PodRmReport{ID: pod.ID}, nil
}

// Prune removes every pod whose containers have all exited or stopped.
func (m *Manager) Prune(ctx context.Context) ([]core.PodRmReport, error) {
	ctx = context.WithoutCancel(ctx)
	members := m.o.Members.PodMembers()
	out := []core.PodRmReport{}
	for _, pod := range m.snapshots() {
		st := Status(statesOf(members[pod.ID]))
		if st != core.PodStateExited && st != core.PodStateStopped {
			continue
		}
		e, err := m.lookup(pod.ID)
		if err != nil {
			continue
		}
		e.op.Lock()
		report, err := m.removeLocked(ctx, e, core.RemovePodOptions{})
		e.op.Unlock()
		if errors.Is(err, core.ErrNoSuchPod) {
			continue
		}
		if err != nil {
			msg := err.Error()
			out = append(out, core.PodRmReport{ID: pod.ID, Err: &msg})
			continue
		}
		out = append(out, *report)
	}
	return out, nil
}

// PruneForSystem is Prune in the shape system prune reports.
func (m *Manager) PruneForSystem(ctx context.Context) ([]*core.PodPruneReport, error) {
	reports, err := m.Prune(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*core.PodPruneReport, 0, len(reports))
	for _, r := range reports {
		pr := &core.PodPruneReport{ID: r.ID}
		if r.Err != nil {
			pr.Err = *r.Err
		}
		out = append(out, pr)
	}
	return out, nil
}
