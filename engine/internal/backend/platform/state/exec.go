package state

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// ExecSessionRecord is one exec session; Data is the caller's serialised session.
type ExecSessionRecord struct {
	ID          string
	ContainerID string
	Created     time.Time
	Data        []byte
}

// PutExecSession inserts or replaces an exec session. ErrNotFound when its
// container does not exist.
func (s *DB) PutExecSession(ctx context.Context, r ExecSessionRecord) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO exec_sessions (id, container_id, created, data) VALUES (?, ?, ?, ?)
			ON CONFLICT(id) DO UPDATE SET data = excluded.data`, r.ID, r.ContainerID, r.Created.UnixNano(), r.Data)
		if err != nil {
			if isConstraint(err) {
				return fmt.Errorf("exec session %s: container %s: %w", r.ID, r.ContainerID, ErrNotFound)
			}
			return fmt.Errorf("put exec session %s: %w", r.ID, err)
		}
		return nil
	})
}

// GetExecSession reads one exec session.
func (s *DB) GetExecSession(ctx context.Context, id string) (ExecSessionRecord, error) {
	var r ExecSessionRecord
	err := s.getRow(ctx, "exec session "+id, `SELECT id, container_id, created, data FROM exec_sessions WHERE id = ?`, id,
		&r.ID, &r.ContainerID, unixNano{&r.Created}, &r.Data)
	return r, err
}

// ListExecSessions returns the exec sessions of a container ("" for all).
func (s *DB) ListExecSessions(ctx context.Context, containerID string) ([]ExecSessionRecord, error) {
	return listRows(ctx, s, "exec sessions", func(r *ExecSessionRecord) []any {
		return []any{&r.ID, &r.ContainerID, unixNano{&r.Created}, &r.Data}
	}, `SELECT id, container_id, created, data FROM exec_sessions
		WHERE ? = '' OR container_id = ? ORDER BY created, id`, containerID, containerID)
}

// DeleteExecSession removes an exec session; ErrNotFound when absent.
func (s *DB) DeleteExecSession(ctx context.Context, id string) error {
	return s.changeRowTx(ctx, "delete", "exec session "+id, `DELETE FROM exec_sessions WHERE id = ?`, id)
}
