package state

import (
	"context"
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
	return s.insertRow(ctx, "pod "+r.Name+" ("+r.ID+")", `INSERT INTO pods (id, name, created, data) VALUES (?, ?, ?, ?)`,
		r.ID, r.Name, r.Created.UnixNano(), r.Data)
}

// RemovePod deletes a pod's record.
func (s *DB) RemovePod(ctx context.Context, id string) error {
	return s.changeRowTx(ctx, "delete", "pod "+id, `DELETE FROM pods WHERE id = ?`, id)
}

// ListPods returns every pod, oldest first.
func (s *DB) ListPods(ctx context.Context) ([]PodRecord, error) {
	return listRows(ctx, s, "pods", func(r *PodRecord) []any {
		return []any{&r.ID, &r.Name, unixNano{&r.Created}, &r.Data}
	}, `SELECT id, name, created, data FROM pods ORDER BY created`)
}
