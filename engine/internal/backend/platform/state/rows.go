package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// The helpers below are the statements every table of the state database
// repeats: an insert whose constraint failure is ErrDuplicate, an update or
// delete that must touch a row (ErrNotFound otherwise), a read of one row
// and a read of many. Each table's file keeps its own SQL and error words, but
// for the tables of named objects with an ID (networks, secrets), whose rows
// have one shape: NamedTable, at the end, writes theirs.

// unixNano scans a nanosecond count, the form every created or time column
// is stored in, into a time.Time.
type unixNano struct{ t *time.Time }

// Scan implements sql.Scanner.
func (u unixNano) Scan(src any) error {
	n, ok := src.(int64)
	if !ok {
		return fmt.Errorf("time column: %T is not a nanosecond count", src)
	}
	*u.t = time.Unix(0, n)
	return nil
}

// insertRow runs an insert in its own transaction; a constraint failure
// (the name or ID taken) is ErrDuplicate, named as what.
func (s *DB) insertRow(ctx context.Context, what, query string, args ...any) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, query, args...); err != nil {
			if isConstraint(err) {
				return fmt.Errorf("%s: %w", what, ErrDuplicate)
			}
			return fmt.Errorf("insert %s: %w", what, err)
		}
		return nil
	})
}

// changeRow runs an update or delete (verb names it in errors) that must
// touch a row of what: ErrNotFound when it touched none.
func changeRow(ctx context.Context, tx *sql.Tx, verb, what, query string, args ...any) error {
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("%s %s: %w", verb, what, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return nil
}

// changeRowTx is changeRow in a transaction of its own.
func (s *DB) changeRowTx(ctx context.Context, verb, what, query string, args ...any) error {
	return s.tx(ctx, func(tx *sql.Tx) error { return changeRow(ctx, tx, verb, what, query, args...) })
}

// getRow reads one row into dest; ErrNotFound, named as what, when there is
// none.
func (s *DB) getRow(ctx context.Context, what, query string, arg any, dest ...any) error {
	err := s.db.QueryRowContext(ctx, query, arg).Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return err
}

// queryTx reads every row a query answers inside tx, each through scan.
// what names the rows in errors.
func queryTx(ctx context.Context, tx *sql.Tx, what string, scan func(*sql.Rows) error, query string, args ...any) error {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("read %s: %w", what, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return fmt.Errorf("read %s: %w", what, err)
		}
	}
	return rows.Err()
}

// listRows reads every row a query answers; fields names the destinations
// of one row's columns in r. what names the list in errors.
func listRows[T any](ctx context.Context, s *DB, what string, fields func(r *T) []any, query string, args ...any) ([]T, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", what, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var r T
		if err := rows.Scan(fields(&r)...); err != nil {
			return nil, fmt.Errorf("list %s: %w", what, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// NamedRecord is one row of a table of named objects with an ID (networks,
// secrets): the name and ID are columns of their own, each unique; Data is
// the object's record as the caller serialises it.
type NamedRecord struct {
	ID      string
	Name    string
	Created time.Time
	Data    []byte
}

// NamedTable is a table of NamedRecords (DB.Networks, DB.Secrets); kind
// names one row in errors.
type NamedTable struct {
	db          *DB
	table, kind string
}

// Add inserts a row; ErrDuplicate when its name or ID is taken.
func (t NamedTable) Add(ctx context.Context, r NamedRecord) error {
	return t.db.insertRow(ctx, t.kind+" "+r.Name, `INSERT INTO `+t.table+` (id, name, created, data) VALUES (?, ?, ?, ?)`,
		r.ID, r.Name, r.Created.UnixNano(), r.Data)
}

// Update replaces the data of an existing row, found by ID.
func (t NamedTable) Update(ctx context.Context, r NamedRecord) error {
	return t.db.changeRowTx(ctx, "update", t.kind+" "+r.Name, `UPDATE `+t.table+` SET data = ? WHERE id = ?`, r.Data, r.ID)
}

// List returns every row, oldest first.
func (t NamedTable) List(ctx context.Context) ([]NamedRecord, error) {
	return listRows(ctx, t.db, t.table, func(r *NamedRecord) []any {
		return []any{&r.ID, &r.Name, unixNano{&r.Created}, &r.Data}
	}, `SELECT id, name, created, data FROM `+t.table+` ORDER BY created, name`)
}
