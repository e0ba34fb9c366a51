// Package janitor finishes what a crash (of a replica, of the database, a full disk)
// left halfway, so that an upload's row and its file tree always come and go together:
// deletions are finished from their tombstone, trees without a row (a create that died
// between the tree and the row) are removed, and the books of a change that died between
// the tree and the booking are recounted from the disk. Every replica sweeps; each step is
// idempotent and runs under the upload's shared lock where it touches the books.
package janitor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/berth-project/berth/uploads/internal/files"
	"github.com/berth-project/berth/uploads/internal/guard"
	"github.com/berth-project/berth/uploads/internal/store"
	"github.com/google/uuid"
)

// Delete deletes upload id: first its tombstone (from then on no request or worker sees
// it, and no change of its tree is in progress or can start), then its tree, then its
// rows. If it stops after the tombstone, any replica's Sweep finishes it. An unknown id is
// not an error, and its tree (if a create is still making it) is left to the sweep.
func Delete(ctx context.Context, st store.Store, tree *files.Tree, id uuid.UUID) error {
	found, err := st.Tombstone(ctx, id)
	if err != nil || !found {
		return err
	}
	return finish(ctx, st, tree, id)
}

func finish(ctx context.Context, st store.Store, tree *files.Tree, id uuid.UUID) error {
	if err := tree.Remove(id.String()); err != nil {
		return err
	}
	return st.Delete(ctx, id)
}

// Sweeper repairs what crashes left; Sweep runs it once.
type Sweeper struct {
	Store  store.Store
	Tree   *files.Tree
	Logger *slog.Logger
	// Grace is how old a tree without a row, or an intent of a change, must be before
	// it counts as left behind by a crash (a create makes the tree just before the row;
	// a change holds its intent for at most guard.Timeout).
	Grace time.Duration
	// Space, when set, gets its headroom reserve made again once there is room.
	Space *files.Space

	// rowsChecked is set once a sweep has looked at every row for its tree.
	rowsChecked bool
}

// Report counts what one sweep repaired.
type Report struct {
	Deleted, Orphans, Settled int
	// Completed counts rows found without a tree (a create that died halfway in a version
	// that made the row first), given their empty tree.
	Completed int
}

// Sweep finishes tombstoned deletions, removes trees without a row and settles the books
// of changes that died halfway.
func (s *Sweeper) Sweep(ctx context.Context) (Report, error) {
	var r Report
	var errs []error
	ids, err := s.Store.Deleting(ctx, 1000)
	if err != nil {
		return r, err
	}
	for _, id := range ids {
		if err := finish(ctx, s.Store, s.Tree, id); err != nil {
			errs = append(errs, fmt.Errorf("finish deleting %s: %w", id, err))
			continue
		}
		r.Deleted++
	}

	if !s.rowsChecked {
		n, err := s.completeCreates(ctx)
		r.Completed += n
		if err != nil {
			errs = append(errs, err)
		} else {
			s.rowsChecked = true
		}
	}

	trees, err := s.Tree.Trees()
	if err != nil {
		return r, errors.Join(append(errs, err)...)
	}
	var old []uuid.UUID
	for _, t := range trees {
		if id, err := uuid.Parse(t.ID); err == nil && t.Age > s.Grace {
			old = append(old, id)
		}
	}
	rows, err := s.Store.Lookup(ctx, old)
	if err != nil {
		return r, errors.Join(append(errs, err)...)
	}
	for _, id := range old {
		if _, ok := rows[id]; ok {
			continue
		}
		if err := s.Tree.Remove(id.String()); err != nil {
			errs = append(errs, err)
			continue
		}
		r.Orphans++
	}

	if err := s.Space.Refill(); err != nil {
		errs = append(errs, err)
	}

	intents, err := s.Tree.Intents(s.Grace)
	if err != nil {
		return r, errors.Join(append(errs, err)...)
	}
	var owners []uuid.UUID
	for _, in := range intents {
		owners = append(owners, in.ID)
	}
	if rows, err = s.Store.Lookup(ctx, owners); err != nil {
		return r, errors.Join(append(errs, err)...)
	}
	for _, in := range intents {
		// An intent at or below the booked generation is stale; one above is a change
		// that died between the tree and the books.
		if u, ok := rows[in.ID]; ok && u.Status != store.StatusDeleting && in.Gen > u.UsageGen {
			if err := s.Tree.Settle(in.ID.String(), guard.New(ctx, s.Store, in.ID, files.Limits{})); err != nil {
				errs = append(errs, fmt.Errorf("settle the books of %s: %w", in.ID, err))
				continue
			}
			r.Settled++
		}
	}
	return r, errors.Join(errs...)
}

// completeCreates gives every row without a tree (none is made any more, but an older
// version made the row before the tree) its empty tree, and books what it holds. It runs
// once per process: it reads every row.
func (s *Sweeper) completeCreates(ctx context.Context) (int, error) {
	done := 0
	for off := 0; ; off += 500 {
		page, _, err := s.Store.List(ctx, 500, off)
		if err != nil {
			return done, err
		}
		for _, u := range page {
			id := u.ID.String()
			if s.Tree.Exists(id) {
				continue
			}
			if err := s.Tree.Create(id); err != nil {
				return done, err
			}
			if err := s.Tree.Recount(id, guard.New(ctx, s.Store, u.ID, files.Limits{})); err != nil && !errors.Is(err, store.ErrNotFound) {
				return done, err
			}
			done++
		}
		if len(page) < 500 {
			return done, nil
		}
	}
}

// Run sweeps at once and then every interval until ctx is done, logging what it did.
func (s *Sweeper) Run(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		r, err := s.Sweep(ctx)
		if err != nil && ctx.Err() == nil {
			s.Logger.Warn("sweeping uploads failed", "err", err)
		}
		if r != (Report{}) {
			s.Logger.Info("swept uploads", "deletionsFinished", r.Deleted, "orphanTreesRemoved", r.Orphans, "booksSettled", r.Settled, "createsCompleted", r.Completed)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
