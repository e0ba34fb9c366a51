package state

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// PodRecord is one row of the pods table. Data is the pod's full record as
// the caller serialises it; ID and Name are kept in columns for uniqueness.
type PodRecord struct {
	ID      string
	Name    string
	Created time.Time
	Data    []byte
}

// AddPod inserts a pod; ErrDuplicate when its ID or name is taken.
func (s *DB) AddPod(ctx context.Context, r PodRecord) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO pods (id, name, created, data) VALUES (?, ?, ?, ?)`,
			r.ID, r.Name, r.Created.UnixNano(), r.Data)
		if err != nil {
			if isConstraint(err) {
				return fmt.Errorf("pod %s (%s): %w", r.Name, r.ID, ErrDuplicate)
			}
			return fmt.Errorf("insert pod %s: %w", r.ID, err)
		}
		return nil
	})
}

// RemovePod deletes a pod's record.
func (s *DB) RemovePod(ctx context.Context, id string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM pods WHERE id = ?`, id)
		if err != nil {
			return fmt.Errorf("delete pod %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("pod %s: %w", id, ErrNotFound)
		}
		return nil
	})
}

// ListPods returns every pod, oldest first.
func (s *DB) ListPods(ctx context.Context) ([]PodRecord, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, name, created, data FROM pods ORDER BY created`)
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	defer rows.Close()
	var out []PodRecord
	for rows.Next() {
		var r PodRecord
		var created int64
		if err := rows.Scan(&r.ID, &r.Name, &created, &r.Data); err != nil {
			return nil, fmt.Errorf("list pods: %w", err)
		}
		r.Created = time.Unix(0, created)
		out = append(out, r)
	}
	return out, rows.Err()
}
