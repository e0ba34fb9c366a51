package containers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/containers/storage"

	"github.com/berth-project/berth/engine/internal/backend/execution/runtime"
	"github.com/berth-project/berth/engine/internal/backend/platform/mounts"
	"github.com/berth-project/berth/engine/internal/backend/platform/state"
	"github.com/berth-project/berth/engine/internal/core"
)

// removedRetention is how long the exit code of a removed container stays
// available to Wait (Podman's five minutes).
const removedRetention = 5 * time.Minute

// Remove removes a container: a running one only with Force (it is stopped
// first), then its runtime state, cgroup, rootfs, storage and record.
func (m *Manager) Remove(ctx context.Context, nameOrID string, opts core.RemoveContainerOptions) error {
	// A client that goes away must not leave a change half done.
	ctx = context.WithoutCancel(ctx)
	defer m.metrics.observe("remove", time.Now())
	e, err := m.lookup(nameOrID)
	if err != nil {
		if opts.Ignore && errors.Is(err, core.ErrNoSuchContainer) {
			return nil
		}
		return err
	}
	if opts.Depend {
		// Before this container's lock: a dependent's start holds its own
		// lock while it starts this one.
		if err := m.removeDependents(ctx, m.snapshot(e).ID, opts); err != nil {
			return err
		}
	}
	e.op.Lock()
	defer e.op.Unlock()
	if m.isRemoved(e) {
		if opts.Ignore {
			return nil
		}
		return core.NoSuchContainer(nameOrID)
	}
	return m.removeLocked(ctx, e, opts)
}

func (m *Manager) removeLocked(ctx context.Context, e *entry, opts core.RemoveContainerOptions) error {
	ctx = context.WithoutCancel(ctx)
	rec := m.snapshot(e)
	if m.isRemoved(e) {
		return nil
	}
	if rec.IsInfra && !opts.WithPod {
		return fmt.Errorf("container %s is the infra container of pod %s and cannot be removed without removing the pod: %w", rec.ID, rec.Pod, core.ErrStateConflict)
	}
	if dependents := m.requiredBy(rec.ID); len(dependents) > 0 && !opts.WithPod {
		return errRequired(&rec, dependents)
	}
	switch rec.State {
	case core.StateRunning, core.StatePaused:
		if !opts.Force {
			return fmt.Errorf("cannot remove container %s as it is %s - running or paused containers cannot be removed without force: %w", rec.ID, rec.State, core.ErrContainerStateImproper)
		}
		if err := m.stopLocked(ctx, e, opts.Timeout, 0); err != nil && !errors.Is(err, core.ErrNotModified) {
			return err
		}
		if m.isRemoved(e) {
			return nil
		}
	case core.StateCreated:
		// Created but never started: conmon waits on runc; delete --force ends both.
	}
	rec = m.snapshot(e)
	if rec.NeedsCleanup {
		if err := m.rt.Delete(ctx, rec.ID, true); err != nil {
			return fmt.Errorf("remove container %s from the runtime: %w", rec.Name, err)
		}
		m.rt.Cleanup(rec.ID)
	}
	m.teardownNetworkLocked(ctx, e)
	if !runtime.WaitConmonExit(rec.ConmonPID, rec.ID, conmonExitTimeout) {
		m.logger.Warn("conmon did not exit after its container; killed it", "container", rec.ID, "pid", rec.ConmonPID)
	}
	m.releaseSystemdUnits(ctx, &rec)
	// The cleanup after an exit may not have run yet (a remove that takes
	// the container's lock first makes it a no-op): its volumes go here.
	m.unmountVolumes(ctx, &rec)
	if rec.Mounted {
		// A container whose storage is gone (system check repairs those) has nothing to unmount.
		if err := m.unmountRoot(rec.ID, &rec.Spec); err != nil && !errors.Is(err, storage.ErrContainerUnknown) && !errors.Is(err, storage.ErrLayerUnknown) {
			return fmt.Errorf("unmount container %s: %w", rec.Name, err)
		}
	}
	// The exit code stays for a wait racing the removal, written with the
	// removal so that a crash keeps one or the other.
	var exit *state.ExitCode
	if rec.State == core.StateExited || rec.State == core.StateStopped {
		exit = &state.ExitCode{Code: rec.ExitCode, Removed: time.Now()}
	}
	if err := m.db.RemoveContainerKeepingExit(ctx, rec.ID, exit); err != nil && !errors.Is(err, state.ErrNotFound) {
		return err
	}
	m.pruneExitCodes(ctx)
	// The unmounted writable layer and the container's directories go in
	// the background; a crash before that is repaired by reapOrphans.
	m.deleting.Add(1)
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		defer m.deleting.Done()
		m.deleteStorage(rec.ID, rec.Bundle, rec.StaticDir)
	}()
	m.mu.Lock()
	e.removed = true
	delete(m.byID, rec.ID)
	if m.byName[rec.Name] == e {
		delete(m.byName, rec.Name)
	}
	close(e.changed)
	e.changed = make(chan struct{})
	m.mu.Unlock()
	m.emit(ctx, core.EventRemove, rec, nil)
	if opts.Volumes {
		m.removeAnonymousVolumes(ctx, rec)
	}
	return nil
}

// pruneExitCodes forgets the exit codes kept longer than removedRetention,
// at most once a minute.
func (m *Manager) pruneExitCodes(ctx context.Context) {
	now := time.Now()
	m.mu.Lock()
	due := now.Sub(m.exitsPruned) >= time.Minute
	if due {
		m.exitsPruned = now
	}
	m.mu.Unlock()
	if !due {
		return
	}
	if err := m.db.PruneExitCodes(ctx, now.Add(-removedRetention)); err != nil {
		m.logger.Warn("forgetting old exit codes failed", "err", err)
	}
}

// deleteStorage deletes a removed container's storage and directories.
func (m *Manager) deleteStorage(id, bundle, static string) {
	m.unmountLayerLeftovers(id)
	unmountPerRun(static)
	if err := discardOverlay(overlayRoot(static)); err != nil {
		m.logger.Warn("unmount a --rootfs overlay", "container", id, "err", err)
	}
	if err := m.store.DeleteContainer(id); err != nil && !errors.Is(err, storage.ErrContainerUnknown) && !errors.Is(err, storage.ErrNotAContainer) {
		m.logger.Warn("delete container storage", "container", id, "err", err)
	}
	os.RemoveAll(bundle)
	// Never through a mount that could not be detached (a volume's part
	// staged below it): that would delete the volume's files.
	if left, err := mounts.Under(static, nil); err != nil || len(left) > 0 {
		m.logger.Warn("container directory keeps mounts; left in place", "container", id, "dir", static, "mounts", left, "err", err)
		return
	}
	os.RemoveAll(static)
}

// unmountLayerLeftovers detaches whatever the kernel still has mounted in
// the container's layer directory once the store counts no mount of it. A
// kill -9 between the overlay mount and the store's record of it leaves a
// mount the store does not count (and its next mount of the layer reuses
// that one without counting it either): the store's unmount then leaves it
// in place, and the deletion would move a mounted rootfs into a temporary
// directory that nothing can remove, which stops the next engine's start.
func (m *Manager) unmountLayerLeftovers(id string) {
	sc, err := m.store.Container(id)
	if err != nil {
		return
	}
	if n, err := m.store.Mounted(id); err != nil || n > 0 {
		return
	}
	dir := filepath.Join(m.store.GraphRoot(), m.store.GraphDriverName(), sc.LayerID)
	n, err := mounts.UnmountUnder(dir, nil)
	if err != nil {
		m.logger.Warn("unmount what is left mounted in a container's layer", "container", id, "err", err)
	}
	if n > 0 {
		m.logger.Warn("unmounted a container rootfs the store did not count as mounted", "container", id, "mounts", n)
	}
}

// reapOrphans deletes storage containers that have no record: containers
// whose removal was cut short by a crash, or whose creation never committed.
func (m *Manager) reapOrphans() {
	list, err := m.store.Containers()
	if err != nil {
		m.logger.Warn("list storage containers", "err", err)
		return
	}
	for _, sc := range list {
		m.mu.RLock()
		_, known := m.byID[sc.ID]
		m.mu.RUnlock()
		if known {
			continue
		}
		if m.rt.Exists(sc.ID) {
			m.rt.Delete(m.ctx, sc.ID, true)
			m.rt.Cleanup(sc.ID)
		}
		m.store.Unmount(sc.ID, true)
		bundle, static, err := m.containerDirs(sc.ID)
		if err != nil {
			continue
		}
		m.logger.Info("deleting storage of a container without record", "container", sc.ID)
		m.deleteStorage(sc.ID, bundle, static)
	}
}

// Prune removes every container that is not running, paused or created and
// matches the filters (label, until).
func (m *Manager) Prune(ctx context.Context, filters map[string][]string) ([]core.PruneReport, error) {
	// A client that goes away must not leave a change half done.
	ctx = context.WithoutCancel(ctx)
	match, err := m.compileFilters(filters, "label", "label!", "until")
	if err != nil {
		return nil, err
	}
	m.mu.RLock()
	var victims []*entry
	for _, e := range m.byID {
		st := e.rec.State
		// Infra containers go with their pod (pod prune), never alone.
		if !e.rec.IsInfra && (st == core.StateExited || st == core.StateStopped || st == core.StateConfigured || st == core.StateCreated) {
			ok, err := match(ctx, &e.rec)
			if err != nil {
				m.mu.RUnlock()
				return nil, err
			}
			if ok {
				victims = append(victims, e)
			}
		}
	}
	m.mu.RUnlock()
	reports := []core.PruneReport{}
	for _, e := range victims {
		e.op.Lock()
		rec := m.snapshot(e)
		var size int64
		if sz, err := m.store.ContainerSize(rec.ID); err == nil {
			size = sz
		}
		st := rec.State
		var rerr error
		if st == core.StateExited || st == core.StateStopped || st == core.StateConfigured || st == core.StateCreated {
			rerr = m.removeLocked(ctx, e, core.RemoveContainerOptions{Volumes: true})
		} else {
			e.op.Unlock()
			continue
		}
		e.op.Unlock()
		r := core.PruneReport{ID: rec.ID, Size: uint64(max(size, 0))}
		if rerr != nil {
			r.Err = rerr.Error()
			r.Size = 0
		}
		reports = append(reports, r)
	}
	return reports, nil
}

// ContainersUsingImage returns the IDs of the containers created from imageID
// (core.ImageUsers, for image removal).
func (m *Manager) ContainersUsingImage(ctx context.Context, imageID string) ([]string, error) {
	// A removed container's layer may still be on its way out of storage.
	m.SettleRemovals()
	m.mu.RLock()
	defer m.mu.RUnlock()
	var ids []string
	for id, e := range m.byID {
		if e.rec.ImageID == imageID || usesImageVolume(&e.rec, imageID) {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// SettleRemovals waits for the background deletions of removed containers'
// storage (core.ImageUsers: image removal and prune read storage after it).
func (m *Manager) SettleRemovals() { m.deleting.Wait() }

// RemoveContainer stops and removes a container (core.ImageUsers, for a
// forced image removal).
func (m *Manager) RemoveContainer(ctx context.Context, containerID string) error {
	return m.Remove(ctx, containerID, core.RemoveContainerOptions{Force: true, Ignore: true})
}

// RemoveContainerWithin stops a container with timeout and removes it
// (core.VolumeUsers, for podman volume rm -f --time).
func (m *Manager) RemoveContainerWithin(ctx context.Context, containerID string, timeout uint) error {
	return m.Remove(ctx, containerID, core.RemoveContainerOptions{Force: true, Ignore: true, Timeout: &timeout})
}
