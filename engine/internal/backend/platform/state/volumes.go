package state

import (
	"context"
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
	return s.insertRow(ctx, "volume "+r.Name, `INSERT INTO volumes (name, created, data) VALUES (?, ?, ?)`,
		r.Name, r.Created.UnixNano(), r.Data)
}

// UpdateVolume replaces the data of an existing volume.
func (s *DB) UpdateVolume(ctx context.Context, r VolumeRecord) error {
	return s.changeRowTx(ctx, "update", "volume "+r.Name, `UPDATE volumes SET data = ? WHERE name = ?`, r.Data, r.Name)
}

// RemoveVolume deletes a volume's record.
func (s *DB) RemoveVolume(ctx context.Context, name string) error {
	return s.changeRowTx(ctx, "delete", "volume "+name, `DELETE FROM volumes WHERE name = ?`, name)
}

// GetVolume reads one volume by name.
func (s *DB) GetVolume(ctx context.Context, name string) (VolumeRecord, error) {
	var r VolumeRecord
	err := s.getRow(ctx, "volume "+name, `SELECT name, created, data FROM volumes WHERE name = ?`, name,
		&r.Name, unixNano{&r.Created}, &r.Data)
	return r, err
}

// ListVolumes returns every volume, oldest first.
func (s *DB) ListVolumes(ctx context.Context) ([]VolumeRecord, error) {
	return listRows(ctx, s, "volumes", func(r *VolumeRecord) []any {
		return []any{&r.Name, unixNano{&r.Created}, &r.Data}
	}, `SELECT name, created, data FROM volumes ORDER BY created, name`)
}
