package containers

import (
	"context"
	"errors"
	"fmt"

	"github.com/berth-project/berth/engine/internal/backend/platform/state"
	"github.com/berth-project/berth/engine/internal/core"
)

var _ core.ContainerMounts = (*Manager)(nil)

// Mount mounts a container's rootfs for a client and returns its path.
func (m *Manager) Mount(ctx context.Context, nameOrID string) (string, error) {
	// A client that goes away must not leave a change half done.
	ctx = context.WithoutCancel(ctx)
	e, rec, unlock, err := m.lockedLookup(nameOrID)
	if err != nil {
		return "", err
	}
	defer unlock()
	rootfs := rec.Rootfs
	if !rec.Mounted {
		rootfs, err = m.mountRoot(rec.ID, &rec.Spec)
		if err != nil {
			return "", fmt.Errorf("mount container %s: %w", rec.Name, err)
		}
	}
	if err := m.update(ctx, e, func(r *record) {
		r.Mounted = true
		r.Rootfs = rootfs
		r.UserMounts++
	}); err != nil {
		return "", err
	}
	m.emit(ctx, core.EventMount, m.snapshot(e), nil)
	return rootfs, nil
}

// Unmount releases a client's mount; the rootfs is unmounted once no
// client holds it and the container is not running.
func (m *Manager) Unmount(ctx context.Context, nameOrID string) error {
	// A client that goes away must not leave a change half done.
	ctx = context.WithoutCancel(ctx)
	e, rec, unlock, err := m.lockedLookup(nameOrID)
	if err != nil {
		return err
	}
	defer unlock()
	if rec.UserMounts == 0 {
		return nil
	}
	live := rec.State == core.StateRunning || rec.State == core.StatePaused || rec.State == core.StateCreated || rec.State == core.StateConfigured
	unmount := rec.UserMounts == 1 && !live && !m.copyHeld(e)
	if unmount {
		if err := m.unmountRoot(rec.ID, &rec.Spec); err != nil {
			return fmt.Errorf("unmount container %s: %w", rec.Name, err)
		}
	}
	if err := m.update(ctx, e, func(r *record) {
		r.UserMounts--
		if unmount {
			r.Mounted = false
			r.Rootfs = ""
		}
	}); err != nil {
		return err
	}
	m.emit(ctx, core.EventUnmount, m.snapshot(e), nil)
	return nil
}

// Mounted maps every container with a mounted rootfs to the mount point.
func (m *Manager) Mounted(ctx context.Context) (map[string]string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := map[string]string{}
	for id, e := range m.byID {
		if e.rec.Mounted && e.rec.Rootfs != "" {
			out[id] = e.rec.Rootfs
		}
	}
	return out, nil
}

// Rename gives a container a new name.
func (m *Manager) Rename(ctx context.Context, nameOrID, newName string) error {
	// A client that goes away must not leave a change half done.
	ctx = context.WithoutCancel(ctx)
	probe := core.ContainerSpec{Image: "-", Name: newName}
	if newName == "" {
		return core.InvalidArgument("name", fmt.Errorf("a new name is required"))
	}
	if err := probe.Validate(); err != nil {
		return err
	}
	e, err := m.lookup(nameOrID)
	if err != nil {
		return err
	}
	e.op.Lock()
	defer e.op.Unlock()
	m.mu.Lock()
	old := e.rec.Name
	if other, taken := m.byName[newName]; taken || m.reserved[newName] {
		m.mu.Unlock()
		if other == e {
			return nil
		}
		holder := ""
		if other != nil {
			holder = other.rec.ID
		}
		return containerNameInUse(newName, holder)
	}
	// Reserve the new name before the write so a concurrent create sees it.
	m.byName[newName] = e
	m.mu.Unlock()
	err = m.update(ctx, e, func(r *record) { r.Name = newName })
	m.mu.Lock()
	if err != nil {
		delete(m.byName, newName)
	} else if m.byName[old] == e {
		delete(m.byName, old)
	}
	m.mu.Unlock()
	if err != nil {
		if isDuplicate(err) {
			return containerNameInUse(newName, "")
		}
		return err
	}
	m.emit(ctx, core.EventRename, m.snapshot(e), map[string]string{"oldName": old})
	return nil
}

func isDuplicate(err error) bool {
	return err != nil && errors.Is(err, state.ErrDuplicate)
}
