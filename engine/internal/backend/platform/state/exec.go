package state

import (
	"context"
	"database/sql"
	"errors"
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
	var created int64
	err := s.db.QueryRowContext(ctx, `SELECT id, container_id, created, data FROM exec_sessions WHERE id = ?`, id).
		Scan(&r.ID, &r.ContainerID, &created, &r.Data)
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("exec session %s: %w", id, ErrNotFound)
	}
	r.Created = time.Unix(0, created)
	return r, err
}

// ListExecSessions returns the exec sessions of a container ("" for all).
func (s *DB) ListExecSessions(ctx context.Context, containerID string) ([]ExecSessionRecord, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, container_id, created, data FROM exec_sessions
		WHERE ? = '' OR container_id = ? ORDER BY created, id`, containerID, containerID)
	if err != nil {
		return nil, fmt.Errorf("list exec sessions: %w", err)
	}
	defer rows.Close()
	var out []ExecSessionRecord
	for rows.Next() {
		var r ExecSessionRecord
		var created int64
		if err := rows.Scan(&r.ID, &r.ContainerID, &created, &r.Data); err != nil {
			return nil, err
		}
		r.Created = time.Unix(0, created)
		out = append(out, r)
	}
	return out, rows.Err()
}

// DeleteExecSession removes an exec session; ErrNotFound when absent.
func (s *DB) DeleteExecSession(ctx context.Context, id string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM exec_sessions WHERE id = ?`, id)
		if err != nil {
			return fmt.Errorf("delete exec session %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("exec session %s: %w", id, ErrNotFound)
		}
		return nil
	})
}
