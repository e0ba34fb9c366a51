package state

import (
	"context"
	"database/sql"
	"time"
)

// SecretRecord is one row of the secrets table: the secret's metadata as the
// caller serialises it (never its data, which lives in a file of its own).
type SecretRecord struct {
	ID      string
	Name    string
	Created time.Time
	Data    []byte
}

// AddSecret inserts a secret; ErrDuplicate when its name or ID is taken.
func (s *DB) AddSecret(ctx context.Context, r SecretRecord) error {
	return s.insertRow(ctx, "secret "+r.Name, `INSERT INTO secrets (id, name, created, data) VALUES (?, ?, ?, ?)`,
		r.ID, r.Name, r.Created.UnixNano(), r.Data)
}

// UpdateSecret replaces the metadata of an existing secret.
func (s *DB) UpdateSecret(ctx context.Context, r SecretRecord) error {
	return s.changeRowTx(ctx, "update", "secret "+r.Name, `UPDATE secrets SET data = ? WHERE id = ?`, r.Data, r.ID)
}

// RemoveSecrets deletes the secrets with the given IDs in one transaction.
func (s *DB) RemoveSecrets(ctx context.Context, ids ...string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		for _, id := range ids {
			if err := changeRow(ctx, tx, "delete", "secret "+id, `DELETE FROM secrets WHERE id = ?`, id); err != nil {
				return err
			}
		}
		return nil
	})
}

// ListSecrets returns every secret, oldest first.
func (s *DB) ListSecrets(ctx context.Context) ([]SecretRecord, error) {
	return listRows(ctx, s, "secrets", func(r *SecretRecord) []any {
		return []any{&r.ID, &r.Name, unixNano{&r.Created}, &r.Data}
	}, `SELECT id, name, created, data FROM secrets ORDER BY created, name`)
}
