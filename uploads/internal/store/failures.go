package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
)

// SQLite result codes (the primary code is the low byte of an extended one).
const (
	sqliteBusy   = 5
	sqliteLocked = 6
	sqliteFull   = 13
)

// Unavailable reports whether err means that the database cannot be reached or cannot
// serve right now (refused or broken connections, a server shutting down or starting up,
// too many connections, a lock not granted in time): the request may be repeated later,
// and the service resumes by itself once the database is back.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03", // shutdown, crash, starting up
			pgErr.Code == "53300",                                               // too many connections
			pgErr.Code == "55P03", pgErr.Code == "40P01", pgErr.Code == "40001": // lock not available, deadlock, serialization
			return true
		}
		return false
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	var liteErr *sqlite.Error
	switch {
	case errors.As(err, &liteErr):
		code := liteErr.Code() & 0xff
		return code == sqliteBusy || code == sqliteLocked
	case errors.As(err, &connectErr), errors.As(err, &netErr),
		errors.Is(err, pgconn.ErrConnClosed), errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrConnDone),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, context.DeadlineExceeded), pgconn.Timeout(err):
		return true
	}
	return false
}

// DiskFull reports whether err is a database's refusal for want of disk space (SQLite's
// SQLITE_FULL, PostgreSQL's disk_full) or the file system's (ENOSPC, EDQUOT).
func DiskFull(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	var liteErr *sqlite.Error
	switch {
	case errors.As(err, &pgErr):
		return pgErr.Code == "53100"
	case errors.As(err, &liteErr):
		return liteErr.Code()&0xff == sqliteFull
	}
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
