package state

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// EventRecord is one stored event. Data is the caller's serialised event
// (attributes and so on); Seq orders events and is assigned on insert.
type EventRecord struct {
	Seq     int64
	Time    time.Time
	Type    string
	Action  string
	ActorID string
	Name    string
	Data    []byte
}

// AppendEvent stores an event and returns its sequence number.
func (s *DB) AppendEvent(ctx context.Context, e EventRecord) (int64, error) {
	var seq int64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO events (time_ns, type, action, actor_id, name, data) VALUES (?, ?, ?, ?, ?, ?)`,
			e.Time.UnixNano(), e.Type, e.Action, e.ActorID, e.Name, e.Data)
		if err != nil {
			return fmt.Errorf("append event: %w", err)
		}
		seq, err = res.LastInsertId()
		return err
	})
	return seq, err
}

// ListEvents returns the events with since <= time < until (a zero bound is
// open), oldest first.
func (s *DB) ListEvents(ctx context.Context, since, until time.Time) ([]EventRecord, error) {
	lo, hi := int64(0), int64(1<<63-1)
	if !since.IsZero() {
		lo = since.UnixNano()
	}
	if !until.IsZero() {
		hi = until.UnixNano()
	}
	return listRows(ctx, s, "events", func(e *EventRecord) []any {
		return []any{&e.Seq, unixNano{&e.Time}, &e.Type, &e.Action, &e.ActorID, &e.Name, &e.Data}
	}, `SELECT seq, time_ns, type, action, actor_id, name, data FROM events
		WHERE time_ns >= ? AND time_ns < ? ORDER BY seq`, lo, hi)
}

// PruneEvents deletes events older than before and returns how many went.
func (s *DB) PruneEvents(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM events WHERE time_ns < ?`, before.UnixNano())
		if err != nil {
			return fmt.Errorf("prune events: %w", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}
