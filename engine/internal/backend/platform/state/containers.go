package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ContainerRecord is one row of the containers table. Data is the container's
// full record as the caller serialises it; ID, Name and State are kept in
// columns for uniqueness and filtering.
type ContainerRecord struct {
	ID      string
	Name    string
	State   string
	Created time.Time
	Data    []byte
	// PodID is the pod the container belongs to ("" for none).
	PodID string
}

// AddContainer inserts a container; ErrDuplicate when its ID or name is taken.
func (s *DB) AddContainer(ctx context.Context, r ContainerRecord) error {
	return s.insertRow(ctx, "container "+r.Name+" ("+r.ID+")", `INSERT INTO containers (id, name, state, created, data, pod_id) VALUES (?, ?, ?, ?, ?, ?)`,
		r.ID, r.Name, r.State, r.Created.UnixNano(), r.Data, r.PodID)
}

// UpdateContainer replaces the state and data of an existing container.
func (s *DB) UpdateContainer(ctx context.Context, r ContainerRecord) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE containers SET name = ?, state = ?, data = ? WHERE id = ?`,
			r.Name, r.State, r.Data, r.ID)
		if err != nil {
			if isConstraint(err) {
				return fmt.Errorf("container name %s: %w", r.Name, ErrDuplicate)
			}
			return fmt.Errorf("update container %s: %w", r.ID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("container %s: %w", r.ID, ErrNotFound)
		}
		return nil
	})
}

// RemoveContainer deletes a container and its exec sessions.
func (s *DB) RemoveContainer(ctx context.Context, id string) error {
	return s.RemoveContainerKeepingExit(ctx, id, nil)
}

// ExitCode is the exit code of a removed container, kept for a while so
// that a wait racing with the removal (podman run --rm) still learns it.
type ExitCode struct {
	Code    int32
	Removed time.Time
}

// RemoveContainerKeepingExit deletes a container and its exec sessions and,
// when exit is not nil, records its exit code in the same transaction: after
// a crash either the container is still there or its exit code is.
func (s *DB) RemoveContainerKeepingExit(ctx context.Context, id string, exit *ExitCode) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		if err := changeRow(ctx, tx, "delete", "container "+id, `DELETE FROM containers WHERE id = ?`, id); err != nil {
			return err
		}
		if exit == nil {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO container_exit_codes (id, exit_code, removed) VALUES (?, ?, ?)`,
			id, exit.Code, exit.Removed.UnixNano()); err != nil {
			return fmt.Errorf("record exit code of container %s: %w", id, err)
		}
		return nil
	})
}

// RemovedExitCode reads the exit code kept for a removed container, by full
// ID; ErrNotFound when none is kept.
func (s *DB) RemovedExitCode(ctx context.Context, id string) (ExitCode, error) {
	var out ExitCode
	var removed int64
	err := s.db.QueryRowContext(ctx, `SELECT exit_code, removed FROM container_exit_codes WHERE id = ?`, id).Scan(&out.Code, &removed)
	if errors.Is(err, sql.ErrNoRows) {
		return out, fmt.Errorf("exit code of container %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return out, fmt.Errorf("read exit code of container %s: %w", id, err)
	}
	out.Removed = time.Unix(0, removed)
	return out, nil
}

// PruneExitCodes forgets the exit codes of containers removed before.
func (s *DB) PruneExitCodes(ctx context.Context, before time.Time) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM container_exit_codes WHERE removed < ?`, before.UnixNano()); err != nil {
		return fmt.Errorf("prune exit codes: %w", err)
	}
	return nil
}

// GetContainer reads one container by full ID.
func (s *DB) GetContainer(ctx context.Context, id string) (ContainerRecord, error) {
	var r ContainerRecord
	err := s.getRow(ctx, "container "+id, `SELECT id, name, state, created, data FROM containers WHERE id = ?`, id,
		&r.ID, &r.Name, &r.State, unixNano{&r.Created}, &r.Data)
	return r, err
}

// ListContainers returns every container, oldest first.
func (s *DB) ListContainers(ctx context.Context) ([]ContainerRecord, error) {
	return listRows(ctx, s, "containers", func(r *ContainerRecord) []any {
		return []any{&r.ID, &r.Name, &r.State, unixNano{&r.Created}, &r.Data}
	}, `SELECT id, name, state, created, data FROM containers ORDER BY created, id`)
}

func isConstraint(err error) bool {
	return err != nil && strings.Contains(err.Error(), "constraint failed")
}
