// Package storetest opens throwaway stores for tests: SQLite in a temporary directory
// always, and PostgreSQL in a fresh schema when BERTH_TEST_POSTGRES_URL is set (required
// when BERTH_TEST_STRICT=1).
package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	"github.com/berth-project/berth/uploads/internal/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// Opener returns a fresh, empty store that is closed (and dropped) when the test ends.
type Opener func(t testing.TB) store.Store

// Backends returns an Opener per available database, keyed "sqlite" and "postgres".
func Backends(t testing.TB) map[string]Opener {
	out := map[string]Opener{"sqlite": SQLite}
	pgURL := os.Getenv("BERTH_TEST_POSTGRES_URL")
	switch {
	case pgURL != "":
		out["postgres"] = func(t testing.TB) store.Store { return Postgres(t, pgURL) }
	case os.Getenv("BERTH_TEST_STRICT") == "1":
		t.Fatal("BERTH_TEST_STRICT=1 but BERTH_TEST_POSTGRES_URL is not set")
	default:
		t.Log("BERTH_TEST_POSTGRES_URL not set: PostgreSQL runs skipped")
	}
	return out
}

// ReplicaOpener opens n stores on one new database, as n replicas sharing it do (each
// with its own connections): SQLite in dataDir, or PostgreSQL in a new schema.
type ReplicaOpener func(t testing.TB, dataDir string, n int) []store.Store

// ReplicaBackends returns a ReplicaOpener per available database, like Backends.
func ReplicaBackends(t testing.TB) map[string]ReplicaOpener {
	out := map[string]ReplicaOpener{"sqlite": func(t testing.TB, dataDir string, n int) []store.Store {
		t.Helper()
		var all []store.Store
		for range n {
			s, err := store.Open(context.Background(), "", dataDir)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			all = append(all, s)
		}
		return all
	}}
	if _, ok := Backends(t)["postgres"]; ok {
		pgURL := os.Getenv("BERTH_TEST_POSTGRES_URL")
		out["postgres"] = func(t testing.TB, _ string, n int) []store.Store {
			t.Helper()
			dsn := SchemaURL(t, pgURL)
			var all []store.Store
			for range n {
				s, err := store.Open(context.Background(), dsn, "")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				all = append(all, s)
			}
			return all
		}
	}
	return out
}

// SQLite opens a store in a temporary directory.
func SQLite(t testing.TB) store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Postgres opens a store in a new schema of the database at baseURL and drops the schema
// when the test ends.
func Postgres(t testing.TB, baseURL string) store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), SchemaURL(t, baseURL), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// SchemaURL creates a new schema in the database at baseURL, dropped when the test ends,
// and returns the URL that uses it.
func SchemaURL(t testing.TB, baseURL string) string {
	t.Helper()
	ctx := context.Background()
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	schema := "berth_test_" + hex.EncodeToString(rnd[:])
	admin := func() *sql.DB {
		cfg, err := pgx.ParseConfig(baseURL)
		if err != nil {
			t.Fatal(err)
		}
		return stdlib.OpenDB(*cfg)
	}
	db := admin()
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE SCHEMA `+schema); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		db := admin()
		defer db.Close()
		_, _ = db.ExecContext(context.Background(), `DROP SCHEMA `+schema+` CASCADE`)
	})
	u, err := url.Parse(baseURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
