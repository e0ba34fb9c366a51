package state

import (
	"context"
	"database/sql"
	"fmt"
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
	return s.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO secrets (id, name, created, data) VALUES (?, ?, ?, ?)`,
			r.ID, r.Name, r.Created.UnixNano(), r.Data)
		if err != nil {
			if isConstraint(err) {
				return fmt.Errorf("secret %s: %w", r.Name, ErrDuplicate)
			}
			return fmt.Errorf("insert secret %s: %w", r.Name, err)
		}
		return nil
	})
}

// UpdateSecret replaces the metadata of an existing secret.
func (s *DB) UpdateSecret(ctx context.Context, r SecretRecord) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE secrets SET data = ? WHERE id = ?`, r.Data, r.ID)
		if err != nil {
			return fmt.Errorf("update secret %s: %w", r.Name, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("secret %s: %w", r.Name, ErrNotFound)
		}
		return nil
	})
}

// RemoveSecrets deletes the secrets with the given IDs in one transaction.
func (s *DB) RemoveSecrets(ctx context.Context, ids ...string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		for _, id := range ids {
			res, err := tx.ExecContext(ctx, `DELETE FROM secrets WHERE id = ?`, id)
			if err != nil {
				return fmt.Errorf("delete secret %s: %w", id, err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return fmt.Errorf("secret %s: %w", id, ErrNotFound)
			}
		}
		return nil
	})
}

// ListSecrets returns every secret, oldest first.
func (s *DB) ListSecrets(ctx context.Context) ([]SecretRecord, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, name, created, data FROM secrets ORDER BY created, name`)
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	defer rows.Close()
	var out []SecretRecord
	for rows.Next() {
		var r SecretRecord
		var created int64
		if err := rows.Scan(&r.ID, &r.Name, &created, &r.Data); err != nil {
			return nil, err
		}
		r.Created = time.Unix(0, created)
		out = append(out, r)
	}
	return out, rows.Err()
}
