package state

import (
	"context"
	"database/sql"
)

// SecretRecord is one row of the secrets table: the secret's metadata as the
// caller serialises it (never its data, which lives in a file of its own).
type SecretRecord = NamedRecord

// Secrets is the secrets table: Add, Update and List as for every table of
// named objects.
func (s *DB) Secrets() NamedTable {
	return NamedTable{db: s, table: "secrets", kind: "secret"}
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
