package store

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" database/sql driver
)

//go:embed migrations
var migrations embed.FS

// DefaultFile is the SQLite database in the data directory used when no URL is given.
const DefaultFile = "uploads.db"

// Open connects to the database named by dsn and brings its schema up to date:
// "postgres://..." or "postgresql://..." is PostgreSQL; "sqlite://PATH", "file:PATH" or a
// plain path is SQLite; "" is dataDir/uploads.db.
func Open(ctx context.Context, dsn, dataDir string) (Store, error) {
	var (
		s   *sqlStore
		err error
	)
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		s, err = openPostgres(dsn)
	case dsn == "":
		s, err = openSQLite(filepath.Join(dataDir, DefaultFile))
	case strings.HasPrefix(dsn, "sqlite://"):
		s, err = openSQLite(strings.TrimPrefix(dsn, "sqlite://"))
	case strings.HasPrefix(dsn, "file:"):
		s, err = openSQLite(strings.TrimPrefix(dsn, "file:"))
	case strings.Contains(dsn, "://"):
		return nil, fmt.Errorf("database %q: unsupported scheme (want postgres:// or a SQLite file)", redact(dsn))
	default:
		s, err = openSQLite(dsn)
	}
	if err != nil {
		return nil, err
	}
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// redact hides a password in a database URL for error messages.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

func openSQLite(file string) (*sqlStore, error) {
	if i := strings.IndexByte(file, '?'); i >= 0 {
		file = file[:i]
	}
	pragmas := "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)"
	dsn := "file:" + file + "?" + pragmas
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", file, err)
	}
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(8)
	db.SetConnMaxIdleTime(0)
	wdb, err := sql.Open("sqlite", dsn+"&_txlock=immediate")
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", file, err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxIdleTime(0)
	return &sqlStore{db: db, wdb: wdb, d: dialect{name: "sqlite"}, now: time.Now}, nil
}

func openPostgres(dsn string) (*sqlStore, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("database %s: %w", redact(dsn), err)
	}
	// A change holds its upload's row lock only while it changes the tree (milliseconds;
	// at most guard's 30 s). Should a replica's host vanish without closing its connection,
	// PostgreSQL ends the transaction, and frees the lock for the other replicas, after a
	// minute idle instead of after TCP keepalive's hours. Both stay the DSN's when it sets them.
	if _, ok := cfg.RuntimeParams["idle_in_transaction_session_timeout"]; !ok {
		cfg.RuntimeParams["idle_in_transaction_session_timeout"] = "60000"
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(20)
	db.SetMaxIdleConns(20)
	return &sqlStore{db: db, wdb: db, d: dialect{name: "postgres", numbered: true, lockClause: " FOR UPDATE SKIP LOCKED", rowLock: " FOR UPDATE"}, now: time.Now}, nil
}

// migrationLock is the PostgreSQL advisory lock key that serializes the migrations of
// replicas starting together.
const migrationLock = 0x6265727468 // "berth"

// migrate applies, in one transaction, every embedded migration of the dialect that the
// schema_migrations table does not list yet.
func (s *sqlStore) migrate(ctx context.Context) error {
	dir := path.Join("migrations", s.d.name)
	entries, err := fs.ReadDir(migrations, dir)
	if err != nil {
		return err
	}
	type migration struct {
		version int
		name    string
	}
	var all []migration
	for _, e := range entries {
		v, _, ok := strings.Cut(e.Name(), "_")
		n, err := strconv.Atoi(v)
		if !ok || err != nil || !strings.HasSuffix(e.Name(), ".sql") {
			return fmt.Errorf("migration file %s: want NNNN_name.sql", e.Name())
		}
		all = append(all, migration{n, e.Name()})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].version < all[j].version })

	return s.inTx(ctx, func(tx *sql.Tx) error {
		if s.d.name == "postgres" {
			if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
				return fmt.Errorf("lock migrations: %w", err)
			}
		}
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		applied := map[int]bool{}
		rows, err := tx.QueryContext(ctx, `SELECT version FROM schema_migrations`)
		if err != nil {
			return fmt.Errorf("read schema_migrations: %w", err)
		}
		for rows.Next() {
			var v int
			if err := rows.Scan(&v); err != nil {
				rows.Close()
				return err
			}
			applied[v] = true
		}
		rows.Close()
		for _, m := range all {
			if applied[m.version] {
				continue
			}
			body, err := migrations.ReadFile(path.Join(dir, m.name))
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, string(body)); err != nil {
				return fmt.Errorf("migration %s: %w", m.name, err)
			}
			if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`), m.version, m.name, s.stamp()); err != nil {
				return fmt.Errorf("record migration %s: %w", m.name, err)
			}
		}
		return nil
	})
}
