package store

import "context"

// QueryRowForTest runs a one-row query on s's connections.
func QueryRowForTest(st Store, query string, dest ...any) error {
	return st.(*sqlStore).db.QueryRowContext(context.Background(), query).Scan(dest...)
}
