package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// dialect holds what differs between SQLite and PostgreSQL.
type dialect struct {
	name string
	// numbered placeholders ($1, $2, ...) instead of "?"
	numbered bool
	// lockClause is appended to the claim's inner SELECT.
	lockClause string
	// rowLock is appended to the SELECT that takes an upload's lock in Mutate. In SQLite
	// the transaction's write lock (BEGIN IMMEDIATE) is the lock, for every process of
	// the host.
	rowLock string
}

// sqlStore implements Store on database/sql. Reads go to db; writes go to wdb, which for
// SQLite is a single connection so that writers queue in Go instead of failing with
// SQLITE_BUSY, and for PostgreSQL is the same pool as db.
type sqlStore struct {
	db, wdb *sql.DB
	d       dialect
	now     func() time.Time
}

const uploadCols = "id, status, created_at, updated_at, files_total, files_processed, error_count, bytes_used, file_count, attempts, image_count, usage_gen"

// q rewrites "?" placeholders for the dialect.
func (s *sqlStore) q(query string) string {
	if !s.d.numbered {
		return query
	}
	var b strings.Builder
	n := 0
	for _, c := range query {
		if c == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

func (s *sqlStore) stamp() int64 { return s.now().UnixMicro() }

type scanner interface{ Scan(dest ...any) error }

func scanUpload(row scanner) (Upload, error) {
	var (
		u         Upload
		id        string
		status    string
		created   int64
		updated   int64
		total     sql.NullInt64
		processed int64
		errCount  int64
		files     int64
		attempts  int64
		images    int64
	)
	if err := row.Scan(&id, &status, &created, &updated, &total, &processed, &errCount, &u.Bytes, &files, &attempts, &images, &u.UsageGen); err != nil {
		return Upload{}, err
	}
	parsed, err := uuid.Parse(id)
	if err != nil {
		return Upload{}, fmt.Errorf("stored upload id %q: %w", id, err)
	}
	u.ID = parsed
	u.Status = Status(status)
	u.CreatedAt = time.UnixMicro(created).UTC()
	u.UpdatedAt = time.UnixMicro(updated).UTC()
	if total.Valid {
		t := int(total.Int64)
		u.FilesTotal = &t
	}
	u.FilesProcessed = int(processed)
	u.Errors = int(errCount)
	u.Files = int(files)
	u.Attempts = int(attempts)
	u.Images = int(images)
	return u, nil
}

func (s *sqlStore) Create(ctx context.Context) (Upload, error) {
	id, err := uuid.NewRandom()
	if err != nil {
		return Upload{}, err
	}
	return s.Insert(ctx, id)
}

func (s *sqlStore) Insert(ctx context.Context, id uuid.UUID) (Upload, error) {
	now := s.stamp()
	row := s.wdb.QueryRowContext(ctx, s.q(`INSERT INTO uploads (id, status, created_at, updated_at) VALUES (?, ?, ?, ?) RETURNING `+uploadCols),
		id.String(), StatusOpen, now, now)
	u, err := scanUpload(row)
	if err != nil {
		return Upload{}, fmt.Errorf("create upload: %w", err)
	}
	return u, nil
}

func (s *sqlStore) Get(ctx context.Context, id uuid.UUID) (Upload, error) {
	return s.get(ctx, s.db, id)
}

func (s *sqlStore) get(ctx context.Context, db *sql.DB, id uuid.UUID) (Upload, error) {
	u, err := scanUpload(db.QueryRowContext(ctx, s.q(`SELECT `+uploadCols+` FROM uploads WHERE id = ? AND status <> ?`), id.String(), StatusDeleting))
	if errors.Is(err, sql.ErrNoRows) {
		return Upload{}, ErrNotFound
	}
	if err != nil {
		return Upload{}, fmt.Errorf("get upload %s: %w", id, err)
	}
	return u, nil
}

func (s *sqlStore) List(ctx context.Context, limit, offset int) ([]Upload, int, error) {
	var total int
	if err := s.db.QueryRowContext(ctx, s.q(`SELECT count(*) FROM uploads WHERE status <> ?`), StatusDeleting).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count uploads: %w", err)
	}
	// The offset is skipped on the covering (created_at, id) index alone; only the rows
	// of the page are read from the table (several times faster at large offsets).
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT `+uploadCols+` FROM uploads
		WHERE id IN (SELECT id FROM uploads WHERE status <> ? ORDER BY created_at, id LIMIT ? OFFSET ?)
		ORDER BY created_at, id`), StatusDeleting, limit, offset)
	if err != nil {
		return nil, 0, fmt.Errorf("list uploads: %w", err)
	}
	defer rows.Close()
	out := make([]Upload, 0, limit)
	for rows.Next() {
		u, err := scanUpload(rows)
		if err != nil {
			return nil, 0, fmt.Errorf("list uploads: %w", err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list uploads: %w", err)
	}
	return out, total, nil
}

func (s *sqlStore) Delete(ctx context.Context, id uuid.UUID) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM upload_errors WHERE upload_id = ?`), id.String()); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM upload_images WHERE upload_id = ?`), id.String()); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, s.q(`DELETE FROM uploads WHERE id = ?`), id.String())
		return err
	})
}

func (s *sqlStore) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// explain finds out why a conditional update of upload id matched no row.
func (s *sqlStore) explain(ctx context.Context, id uuid.UUID, allowed ...Status) error {
	u, err := s.get(ctx, s.wdb, id)
	if err != nil {
		return err
	}
	if err := CheckState(u, allowed...); err != nil {
		return err
	}
	return nil
}

func (s *sqlStore) MarkForProcessing(ctx context.Context, id uuid.UUID) (Upload, error) {
	u, err := scanUpload(s.wdb.QueryRowContext(ctx, s.q(`UPDATE uploads SET status = ?, updated_at = ?, lease_until = 0, owner = '' WHERE id = ? AND status = ? RETURNING `+uploadCols),
		StatusPending, s.stamp(), id.String(), StatusOpen))
	if errors.Is(err, sql.ErrNoRows) {
		if err := s.explain(ctx, id, StatusOpen); err != nil {
			return Upload{}, err
		}
		return Upload{}, fmt.Errorf("mark %s for processing: state changed concurrently", id)
	}
	if err != nil {
		return Upload{}, fmt.Errorf("mark %s for processing: %w", id, err)
	}
	return u, nil
}

func (s *sqlStore) Mutate(ctx context.Context, id uuid.UUID, fn func(u Upload) (Usage, error)) error {
	if s.d.name == "postgres" {
		return s.mutatePipelined(ctx, id, fn)
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		u, err := scanUpload(tx.QueryRowContext(ctx, s.q(`SELECT `+uploadCols+` FROM uploads WHERE id = ?`+s.d.rowLock), id.String()))
		next, err := lockedUsage(id, u, err, fn)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, s.q(`UPDATE uploads SET bytes_used = ?, file_count = ?, usage_gen = ?, updated_at = ? WHERE id = ?`),
			next.Bytes, next.Files, u.UsageGen+1, s.stamp(), id.String())
		if err != nil {
			return fmt.Errorf("book usage of %s: %w", id, err)
		}
		return nil
	})
}

// lockedUsage is Mutate's step between its two statements: the upload u
// read and locked (or the error err of reading it) becomes fn's new usage.
// A missing or deleted upload is ErrNotFound.
func lockedUsage(id uuid.UUID, u Upload, err error, fn func(u Upload) (Usage, error)) (Usage, error) {
	switch {
	case errors.Is(err, sql.ErrNoRows), errors.Is(err, pgx.ErrNoRows):
		return Usage{}, ErrNotFound
	case err != nil:
		return Usage{}, fmt.Errorf("lock upload %s: %w", id, err)
	case u.Status == StatusDeleting:
		return Usage{}, ErrNotFound
	}
	return fn(u)
}

// mutatePipelined is Mutate for PostgreSQL in two round trips instead of four: BEGIN
// with the locking SELECT, then the UPDATE with the COMMIT, each sent as one pipelined
// batch. The lock is held across fn, so every round trip saved shortens the time other
// replicas' changes of the same upload wait.
func (s *sqlStore) mutatePipelined(ctx context.Context, id uuid.UUID, fn func(u Upload) (Usage, error)) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("lock upload %s: %w", id, err)
	}
	defer conn.Close()
	return conn.Raw(func(driverConn any) error {
		pc := driverConn.(*stdlib.Conn).Conn()
		inTx := false
		// A connection left inside a transaction (or in doubt) must not go back to the
		// pool: roll back, and close it when even that fails.
		defer func() {
			if inTx {
				if _, err := pc.Exec(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
					_ = pc.Close(context.WithoutCancel(ctx))
				}
			}
		}()
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		b.Queue(`SELECT `+uploadCols+` FROM uploads WHERE id = $1 FOR UPDATE`, id.String())
		br := pc.SendBatch(ctx, b)
		inTx = true
		_, err := br.Exec()
		var u Upload
		if err == nil {
			u, err = scanUpload(br.QueryRow())
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		next, err := lockedUsage(id, u, err, fn)
		if err != nil {
			return err
		}
		b = &pgx.Batch{}
		b.Queue(`UPDATE uploads SET bytes_used = $1, file_count = $2, usage_gen = $3, updated_at = $4 WHERE id = $5`,
			next.Bytes, next.Files, u.UsageGen+1, s.stamp(), id.String())
		b.Queue("COMMIT")
		if err := pc.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("book usage of %s: %w", id, err)
		}
		inTx = false
		return nil
	})
}

func (s *sqlStore) Tombstone(ctx context.Context, id uuid.UUID) (bool, error) {
	// In PostgreSQL the UPDATE waits for the row lock of a Mutate in progress, so no
	// change of the tree is under way once it returns.
	res, err := s.wdb.ExecContext(ctx, s.q(`UPDATE uploads SET status = ?, owner = '', updated_at = ? WHERE id = ?`),
		StatusDeleting, s.stamp(), id.String())
	if err != nil {
		return false, fmt.Errorf("mark %s deleted: %w", id, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

func (s *sqlStore) Lookup(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]Upload, error) {
	out := make(map[uuid.UUID]Upload, len(ids))
	for len(ids) > 0 {
		batch := ids[:min(len(ids), 500)]
		ids = ids[len(batch):]
		args := make([]any, len(batch))
		marks := make([]string, len(batch))
		for i, id := range batch {
			args[i], marks[i] = id.String(), "?"
		}
		rows, err := s.db.QueryContext(ctx, s.q(`SELECT `+uploadCols+` FROM uploads WHERE id IN (`+strings.Join(marks, ",")+`)`), args...)
		if err != nil {
			return nil, fmt.Errorf("look up uploads: %w", err)
		}
		for rows.Next() {
			u, err := scanUpload(rows)
			if err != nil {
				rows.Close()
				return nil, fmt.Errorf("look up uploads: %w", err)
			}
			out[u.ID] = u
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("look up uploads: %w", err)
		}
	}
	return out, nil
}

func (s *sqlStore) Deleting(ctx context.Context, limit int) ([]uuid.UUID, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT id FROM uploads WHERE status = ? ORDER BY updated_at LIMIT ?`), StatusDeleting, limit)
	if err != nil {
		return nil, fmt.Errorf("list deleted uploads: %w", err)
	}
	defer rows.Close()
	var out []uuid.UUID
	for rows.Next() {
		var raw string
		if err := rows.Scan(&raw); err != nil {
			return nil, err
		}
		id, err := uuid.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("stored upload id %q: %w", raw, err)
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

func (s *sqlStore) Errors(ctx context.Context, id uuid.UUID, limit, offset int) ([]FileError, int, error) {
	// The counter and the entries are written in one transaction, so the counter of the
	// upload read first is the total.
	return processedPage(ctx, s, id, func(u Upload) int { return u.Errors }, "errors",
		`SELECT file, message FROM upload_errors WHERE upload_id = ? ORDER BY seq LIMIT ? OFFSET ?`, limit, offset,
		func(rows *sql.Rows, fe *FileError) error { return rows.Scan(&fe.File, &fe.Message) })
}

func (s *sqlStore) Images(ctx context.Context, id uuid.UUID, limit, offset int) ([]DeployedImage, int, error) {
	// Like the error entries, the counter is written with the rows it counts.
	return processedPage(ctx, s, id, func(u Upload) int { return u.Images }, "images",
		`SELECT file, name FROM upload_images WHERE upload_id = ? ORDER BY seq, ordinal LIMIT ? OFFSET ?`, limit, offset,
		func(rows *sql.Rows, img *DeployedImage) error { return rows.Scan(&img.File, &img.Name) })
}

// processedPage reads one page of what processing recorded for an upload
// (its error entries or its deployed images), which exists only from
// processing on, and the total that the upload's counter holds.
func processedPage[T any](ctx context.Context, s *sqlStore, id uuid.UUID, total func(Upload) int, what, query string, limit, offset int, scan func(*sql.Rows, *T) error) ([]T, int, error) {
	u, err := s.Get(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	if err := CheckState(u, StatusProcessing, StatusDone); err != nil {
		return nil, 0, err
	}
	rows, err := s.db.QueryContext(ctx, s.q(query), id.String(), limit, offset)
	if err != nil {
		return nil, 0, fmt.Errorf("list %s of %s: %w", what, id, err)
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		var v T
		if err := scan(rows, &v); err != nil {
			return nil, 0, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	return out, total(u), nil
}

func (s *sqlStore) CountByStatus(ctx context.Context) (map[Status]int, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT status, count(*) FROM uploads WHERE status <> ? GROUP BY status`), StatusDeleting)
	if err != nil {
		return nil, fmt.Errorf("count uploads by status: %w", err)
	}
	defer rows.Close()
	out := map[Status]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, err
		}
		out[Status(st)] = n
	}
	return out, rows.Err()
}

func (s *sqlStore) TotalBytes(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(SUM(bytes_used), 0) FROM uploads`).Scan(&n); err != nil {
		return 0, fmt.Errorf("sum upload sizes: %w", err)
	}
	return n, nil
}

func (s *sqlStore) Claim(ctx context.Context, owner string, lease time.Duration) (Upload, bool, error) {
	now := s.now()
	query := `UPDATE uploads SET status = ?, owner = ?, lease_until = ?, updated_at = ?
		WHERE id = (SELECT id FROM uploads WHERE status IN (?, ?) AND lease_until <= ? ORDER BY lease_until, created_at LIMIT 1` + s.d.lockClause + `)
		AND status IN (?, ?) AND lease_until <= ?
		RETURNING ` + uploadCols
	u, err := scanUpload(s.wdb.QueryRowContext(ctx, s.q(query),
		StatusProcessing, owner, now.Add(lease).UnixMicro(), now.UnixMicro(),
		StatusPending, StatusProcessing, now.UnixMicro(),
		StatusPending, StatusProcessing, now.UnixMicro()))
	if errors.Is(err, sql.ErrNoRows) {
		return Upload{}, false, nil
	}
	if err != nil {
		return Upload{}, false, fmt.Errorf("claim an upload: %w", err)
	}
	return u, true, nil
}

func (s *sqlStore) claimed(res sql.Result, err error, what string, id uuid.UUID) error {
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, id, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("%s %s: %w", what, id, ErrLostClaim)
	}
	return nil
}

func (s *sqlStore) SetTotal(ctx context.Context, id uuid.UUID, owner string, total int) error {
	res, err := s.wdb.ExecContext(ctx, s.q(`UPDATE uploads SET files_total = ?, updated_at = ? WHERE id = ? AND owner = ? AND status = ? AND files_total IS NULL`),
		total, s.stamp(), id.String(), owner, StatusProcessing)
	return s.claimed(res, err, "set file total of", id)
}

func (s *sqlStore) RecordFile(ctx context.Context, id uuid.UUID, owner string, index int, entry *FileError, images []DeployedImage, lease time.Duration) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		now := s.now()
		added := 0
		if entry != nil {
			added = 1
		}
		res, err := tx.ExecContext(ctx, s.q(`UPDATE uploads SET files_processed = ?, error_count = error_count + ?, image_count = image_count + ?, attempts = 0, lease_until = ?, updated_at = ?
			WHERE id = ? AND owner = ? AND status = ? AND files_processed = ?`),
			index+1, added, len(images), now.Add(lease).UnixMicro(), now.UnixMicro(), id.String(), owner, StatusProcessing, index)
		if err := s.claimed(res, err, "record file of", id); err != nil {
			return err
		}
		for ordinal, img := range images {
			_, err = tx.ExecContext(ctx, s.q(`INSERT INTO upload_images (upload_id, seq, ordinal, file, name) VALUES (?, ?, ?, ?, ?)`),
				id.String(), index, ordinal, img.File, img.Name)
			if err != nil {
				return fmt.Errorf("record deployed image of %s: %w", id, err)
			}
		}
		if entry == nil {
			return nil
		}
		_, err = tx.ExecContext(ctx, s.q(`INSERT INTO upload_errors (upload_id, seq, file, message) VALUES (?, ?, ?, ?)`),
			id.String(), index, entry.File, entry.Message)
		if err != nil {
			return fmt.Errorf("record error entry of %s: %w", id, err)
		}
		return nil
	})
}

func (s *sqlStore) Renew(ctx context.Context, id uuid.UUID, owner string, lease time.Duration) error {
	res, err := s.wdb.ExecContext(ctx, s.q(`UPDATE uploads SET lease_until = ? WHERE id = ? AND owner = ? AND status = ?`),
		s.now().Add(lease).UnixMicro(), id.String(), owner, StatusProcessing)
	return s.claimed(res, err, "renew claim of", id)
}

func (s *sqlStore) Release(ctx context.Context, id uuid.UUID, owner string, retryAt time.Time) error {
	res, err := s.wdb.ExecContext(ctx, s.q(`UPDATE uploads SET owner = '', lease_until = ?, attempts = attempts + 1, updated_at = ? WHERE id = ? AND owner = ? AND status = ?`),
		retryAt.UnixMicro(), s.stamp(), id.String(), owner, StatusProcessing)
	return s.claimed(res, err, "release", id)
}

func (s *sqlStore) Finish(ctx context.Context, id uuid.UUID, owner string) error {
	res, err := s.wdb.ExecContext(ctx, s.q(`UPDATE uploads SET status = ?, owner = '', lease_until = 0, updated_at = ? WHERE id = ? AND owner = ? AND status = ?`),
		StatusDone, s.stamp(), id.String(), owner, StatusProcessing)
	return s.claimed(res, err, "finish", id)
}

func (s *sqlStore) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return err
	}
	var one int
	return s.db.QueryRowContext(ctx, `SELECT 1`).Scan(&one)
}

func (s *sqlStore) Close() error {
	err := s.db.Close()
	if s.wdb != s.db {
		err = errors.Join(err, s.wdb.Close())
	}
	return err
}
