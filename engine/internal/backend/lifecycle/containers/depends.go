package containers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/berth-project/berth/engine/internal/core"
)

// Dependencies: a container created with dependency_containers (podman's
// --requires) or joining another's IPC namespace depends on it. Starting a
// container starts what it depends on first, as Podman does; a container
// others require cannot be removed before them unless the removal takes
// them along (depend). Dependencies are recorded by ID and must exist when
// the container is created, so they never form a cycle.

// resolveDependencies records the containers a create requires by ID; an
// unknown one is a 400 naming the member.
func (m *Manager) resolveDependencies(spec *core.ContainerSpec) error {
	var ids []string
	for _, name := range spec.DependencyContainers {
		dep, err := m.lookupDonor("dependencyContainers", name)
		if err != nil {
			return err
		}
		if id := dep.ID; !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	spec.DependencyContainers = ids
	return nil
}

// dependencies are the IDs of the containers rec depends on: those it
// requires, then its IPC donor.
func dependencies(rec *record) []string {
	out := slices.Clone(rec.Spec.DependencyContainers)
	if rec.Spec.IpcNS.NSMode == core.IPCNSContainer && !slices.Contains(out, rec.Spec.IpcNS.Value) {
		out = append(out, rec.Spec.IpcNS.Value)
	}
	for _, id := range namespaceDonors(rec) {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	if out == nil {
		out = []string{}
	}
	return out
}

// ensureDependenciesRunning starts each container rec depends on that does
// not run (each starts its own dependencies in turn).
func (m *Manager) ensureDependenciesRunning(ctx context.Context, rec *record) error {
	for _, id := range dependencies(rec) {
		e, err := m.lookup(id)
		if err != nil {
			return fmt.Errorf("container %s depends on container %s, which is gone: %w", rec.Name, id, core.ErrStateConflict)
		}
		dep := m.snapshot(e)
		switch dep.State {
		case core.StateRunning:
			continue
		case core.StatePaused:
			return fmt.Errorf("container %s depends on container %s, which is paused: %w", rec.Name, dep.Name, core.ErrContainerStateImproper)
		}
		if err := m.Start(ctx, id); err != nil && !errors.Is(err, core.ErrNotModified) {
			return fmt.Errorf("a dependency of container %s failed to start: %w", rec.Name, err)
		}
	}
	return nil
}

// requiredBy lists the IDs of the containers that require id (--requires).
// An IPC joiner does not hold its donor back: Docker removes a donor
// whose joiners remain.
func (m *Manager) requiredBy(id string) []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []string
	for _, e := range m.byID {
		if slices.Contains(e.rec.Spec.DependencyContainers, id) {
			out = append(out, e.rec.ID)
		}
	}
	slices.Sort(out)
	return out
}

// removeDependents removes, before the container itself, every container
// that requires it, theirs first (podman rm --depend), reporting each.
func (m *Manager) removeDependents(ctx context.Context, id string, opts core.RemoveContainerOptions) error {
	for _, dep := range m.requiredBy(id) {
		if _, err := m.lookup(dep); err != nil {
			continue // gone with another dependent
		}
		if err := m.removeDependents(ctx, dep, opts); err != nil {
			return err
		}
		if err := m.Remove(ctx, dep, core.RemoveContainerOptions{Force: opts.Force, Volumes: opts.Volumes, Timeout: opts.Timeout, Ignore: true}); err != nil {
			return err
		}
		if opts.Removed != nil {
			opts.Removed(dep)
		}
	}
	return nil
}

// errRequired refuses the removal of a container others require.
func errRequired(rec *record, dependents []string) error {
	return fmt.Errorf("container %s has dependent containers which must be removed before it: %s: %w", rec.ID, strings.Join(dependents, ", "), core.ErrStateConflict)
}
