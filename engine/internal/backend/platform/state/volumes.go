package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// VolumeRecord is one row of the volumes table. Data is the volume's full
// record as the caller serialises it; Name is kept in a column for uniqueness.
type VolumeRecord struct {
	Name    string
	Created time.Time
	Data    []byte
}

// AddVolume inserts a volume; ErrDuplicate when its name is taken.
func (s *DB) AddVolume(ctx context.Context, r VolumeRecord) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO volumes (name, created, data) VALUES (?, ?, ?)`,
			r.Name, r.Created.UnixNano(), r.Data)
		if err != nil {
			if isConstraint(err) {
				return fmt.Errorf("volume %s: %w", r.Name, ErrDuplicate)
			}
			return fmt.Errorf("insert volume %s: %w", r.Name, err)
		}
		return nil
	})
}

// UpdateVolume replaces the data of an existing volume.
func (s *DB) UpdateVolume(ctx context.Context, r VolumeRecord) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE volumes SET data = ? WHERE name = ?`, r.Data, r.Name)
		if err != nil {
			return fmt.Errorf("update volume %s: %w", r.Name, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("volume %s: %w", r.Name, ErrNotFound)
		}
		return nil
	})
}

// RemoveVolume deletes a volume's record.
func (s *DB) RemoveVolume(ctx context.Context, name string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM volumes WHERE name = ?`, name)
		if err != nil {
			return fmt.Errorf("delete volume %s: %w", name, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("volume %s: %w", name, ErrNotFound)
		}
		return nil
	})
}

// GetVolume reads one volume by name.
func (s *DB) GetVolume(ctx context.Context, name string) (VolumeRecord, error) {
	var r VolumeRecord
	var created int64
	err := s.db.QueryRowContext(ctx, `SELECT name, created, data FROM volumes WHERE name = ?`, name).
		Scan(&r.Name, &created, &r.Data)
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("volume %s: %w", name, ErrNotFound)
	}
	r.Created = time.Unix(0, created)
	return r, err
}

// ListVolumes returns every volume, oldest first.
func (s *DB) ListVolumes(ctx context.Context) ([]VolumeRecord, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, created, data FROM volumes ORDER BY created, name`)
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	defer rows.Close()
	var out []VolumeRecord
	for rows.Next() {
		var r VolumeRecord
		var created int64
		if err := rows.Scan(&r.Name, &created, &r.Data); err != nil {
			return nil, err
		}
		r.Created = time.Unix(0, created)
		out = append(out, r)
	}
	return out, rows.Err()
}
