// Package statetest opens a store on a state database of its own, as the
// unit tests of the stores built on the state database (secrets, volumes
// ...) do: each opens, closes and reopens both to see what persists.
package statetest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/berth-project/berth/engine/internal/backend/platform/state"
)

// OpenStore opens the state database dir/state.db and the store that open
// makes on it; the test closes the database (db.Close) when it is done.
func OpenStore[S any](t testing.TB, dir string, open func(ctx context.Context, db *state.DB) (S, error)) (S, *state.DB) {
	t.Helper()
	db, err := state.Open(context.Background(), filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := open(context.Background(), db)
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	return s, db
}
