package containers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/execution/runtime"
	"github.com/berth-project/berth/engine/internal/core"
)

var _ core.ContainerCheckpoints = (*Manager)(nil)

func checkpointDir(rec record) string { return filepath.Join(rec.StaticDir, "checkpoint") }

// Checkpoint dumps a running container with CRIU through the OCI runtime.
func (m *Manager) Checkpoint(ctx context.Context, nameOrID string, opts core.CheckpointOptions) (time.Duration, error) {
	ctx = context.WithoutCancel(ctx)
	e, err := m.lookup(nameOrID)
	if err != nil {
		return 0, err
	}
	e.op.Lock()
	defer e.op.Unlock()
	rec := m.snapshot(e)
	if rec.State != core.StateRunning && rec.State != core.StatePaused {
		return 0, fmt.Errorf("container %s is %s; only running containers can be checkpointed: %w", rec.Name, rec.State, core.ErrStateConflict)
	}
	dir := checkpointDir(rec)
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, err
	}
	start := time.Now()
	err = m.rt.Checkpoint(ctx, rec.ID, dir, runtime.CheckpointOptions{
		LeaveRunning: opts.LeaveRunning, TCPEstablished: opts.TCPEstablished, FileLocks: opts.FileLocks,
	})
	took := time.Since(start)
	if err != nil {
		// The directory keeps CRIU's dump.log, which the error names; it
		// goes with the container.
		return took, fmt.Errorf("checkpoint container %s: %w", rec.Name, err)
	}
	if err := m.update(ctx, e, func(r *record) { r.Checkpointed = true }); err != nil {
		return took, err
	}
	if !opts.LeaveRunning {
		// CRIU ended the process; conmon records the exit.
		if m.waitExit(ctx, e, time.Now().Add(30*time.Second)) {
			m.cleanupLocked(ctx, e)
		}
	}
	return took, nil
}

// Restore starts a checkpointed container from its checkpoint.
func (m *Manager) Restore(ctx context.Context, nameOrID string, opts core.RestoreOptions) (time.Duration, error) {
	ctx = context.WithoutCancel(ctx)
	e, err := m.lookup(nameOrID)
	if err != nil {
		return 0, err
	}
	e.op.Lock()
	defer e.op.Unlock()
	rec := m.snapshot(e)
	if !rec.Checkpointed {
		return 0, fmt.Errorf("container %s has no checkpoint: %w", rec.Name, core.ErrStateConflict)
	}
	if rec.State != core.StateExited && rec.State != core.StateStopped && rec.State != core.StateConfigured {
		return 0, fmt.Errorf("container %s is %s; stop it before restoring its checkpoint: %w", rec.Name, rec.State, core.ErrStateConflict)
	}
	dir := checkpointDir(rec)
	if _, err := os.Stat(filepath.Join(dir, "inventory.img")); err != nil {
		return 0, fmt.Errorf("container %s: checkpoint in %s is incomplete: %w", rec.Name, dir, core.ErrStateConflict)
	}
	m.cleanupLocked(ctx, e)
	rec = m.snapshot(e)
	if !rec.Mounted {
		if _, err := m.prepare(ctx, &rec, nil); err != nil {
			return 0, err
		}
	}
	start := time.Now()
	created, err := m.rt.Create(ctx, runtime.CreateOptions{
		ID: rec.ID, Name: rec.Name, Bundle: rec.Bundle, LogPath: rec.LogPath,
		Terminal: rec.Spec.Terminal, Stdin: rec.Spec.Stdin,
		RestoreDir: dir, RuntimeOpts: runtime.RestoreOptions(dir, opts.TCPEstablished, opts.FileLocks),
	})
	took := time.Since(start)
	if err != nil {
		m.rt.Delete(ctx, rec.ID, true)
		m.rt.Cleanup(rec.ID)
		m.update(ctx, e, func(r *record) {
			r.Rootfs, r.Mounted, r.Path, r.Args = rec.Rootfs, rec.Mounted, rec.Path, rec.Args
		})
		var ce *runtime.CreateError
		if errors.As(err, &ce) {
			return took, fmt.Errorf("restore container %s: %s", rec.Name, ce.Message)
		}
		return took, fmt.Errorf("restore container %s: %w", rec.Name, err)
	}
	if err := m.update(ctx, e, func(r *record) {
		r.Rootfs, r.Mounted, r.Path, r.Args = rec.Rootfs, rec.Mounted, rec.Path, rec.Args
		r.State = core.StateRunning
		r.PID = created.PID
		r.ConmonPID = created.ConmonPID
		r.PauseProcess = created.Pause
		r.NeedsCleanup = true
		r.StartedAt = time.Now()
		r.Error = ""
		r.ExitCode = 0
		r.Checkpointed = opts.Keep
	}); err != nil {
		return took, err
	}
	if !opts.Keep {
		os.RemoveAll(dir)
	}
	m.emit(ctx, core.EventStart, m.snapshot(e), map[string]string{"restored": "true"})
	m.handleExit(ctx, e)
	return took, nil
}
