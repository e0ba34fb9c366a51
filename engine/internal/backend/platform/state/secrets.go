package state

import (
	"context"
	"database/sql"
)

// SecretRecord is one row of the secrets table: the secret's metadata as the
// caller serialises it (never its data, which lives in a file of its own).
type SecretRecord = NamedRecord

// secrets holds the secrets' metadata: named objects with an ID.
var secrets = namedTable{table: "secrets", kind: "secret"}

// AddSecret inserts a secret; ErrDuplicate when its name or ID is taken.
func (s *DB) AddSecret(ctx context.Context, r SecretRecord) error {
	return secrets.add(ctx, s, r)
}

// UpdateSecret replaces the metadata of an existing secret.
func (s *DB) UpdateSecret(ctx context.Context, r SecretRecord) error {
	return secrets.update(ctx, s, r)
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
	return secrets.list(ctx, s)
}
