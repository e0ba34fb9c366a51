// Package guard joins the two halves of an upload: its file tree (package files) and its
// books in the database (package store). A change of the tree runs under the upload's
// database lock, which every replica sharing the database shares, and is booked before
// that lock is released.
package guard

import (
	"context"
	"time"

	"github.com/berth-project/berth/uploads/internal/files"
	"github.com/berth-project/berth/uploads/internal/store"
	"github.com/google/uuid"
)

// Timeout bounds how long a change waits for, and holds, an upload's lock.
const Timeout = 30 * time.Second

// Guard is the files.Guard of one upload.
type Guard struct {
	ctx    context.Context
	st     store.Store
	id     uuid.UUID
	limits files.Limits
	states []store.Status
}

// New returns the guard of upload id: changes are admitted against limits and only in
// one of states (any state when none is given). It runs without ctx's cancellation (but
// with its values), so that a client hanging up cannot cut a change off between the tree
// and the books.
func New(ctx context.Context, st store.Store, id uuid.UUID, limits files.Limits, states ...store.Status) Guard {
	return Guard{ctx: context.WithoutCancel(ctx), st: st, id: id, limits: limits, states: states}
}

// Limits are the upload limits a write is checked against.
func (g Guard) Limits() files.Limits { return g.limits }

// Locked runs fn under the upload's lock (store.Mutate) once its state allows the change.
func (g Guard) Locked(fn func(booked files.Usage, gen int64) (files.Usage, error)) error {
	ctx, cancel := context.WithTimeout(g.ctx, Timeout)
	defer cancel()
	return g.st.Mutate(ctx, g.id, func(u store.Upload) (store.Usage, error) {
		if len(g.states) > 0 {
			if err := store.CheckState(u, g.states...); err != nil {
				return store.Usage{}, err
			}
		}
		next, err := fn(files.Usage{Bytes: u.Bytes, Files: u.Files}, u.UsageGen)
		return store.Usage{Bytes: next.Bytes, Files: next.Files}, err
	})
}
