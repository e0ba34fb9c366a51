package files

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// The intent of an upload records, before a change of its tree, the generation that the
// change is to be booked with: a process killed between the change and the booking's
// commit, or a booking that failed (the database went away), leaves the intent one
// generation above the books. The next change of the upload (whoever makes it, under the
// shared lock) finds that and recounts the usage from the disk instead of trusting the
// books; the sweep does the same for an upload that nobody changes any more. An intent at
// or below the booked generation is stale and means nothing, so a change never has to
// remove it: the intent is one small file per upload (<id>/intent), rewritten in place,
// which costs no directory operation on the hot path.
const intentFile = "intent"

// intentWidth is the fixed size of the generation as written (zero-padded), so that a
// rewrite never needs to truncate.
const intentWidth = 20

func (t *Tree) intentPath(id string) string { return filepath.Join(t.base, id, intentFile) }

// readIntent returns the generation in f; -1 when it holds none (new, or unreadable,
// which settle treats as dirty only when it is not new).
func readIntent(f *os.File) (gen int64, empty bool, err error) {
	var buf [intentWidth]byte
	n, err := f.ReadAt(buf[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, false, err
	}
	if n == 0 {
		return 0, true, nil
	}
	g, perr := strconv.ParseInt(strings.TrimSpace(string(buf[:n])), 10, 64)
	if perr != nil {
		return -1, false, nil
	}
	return g, false, nil
}

// settle returns the usage a change of upload id must start from, with the intent file
// open for markIntent: the books, unless the change after generation gen left its intent
// (it died or failed to book after touching the tree), in which case the usage measured
// on disk. It runs under the shared lock; the caller closes the file.
func (t *Tree) settle(id string, booked Usage, gen int64) (Usage, *os.File, error) {
	f, err := os.OpenFile(t.intentPath(id), os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Usage{}, nil, ErrNotExist
		}
		return Usage{}, nil, fmt.Errorf("open the intent of %s: %w", id, err)
	}
	got, empty, err := readIntent(f)
	if err != nil {
		f.Close()
		return Usage{}, nil, fmt.Errorf("read the intent of %s: %w", id, err)
	}
	if empty || (got >= 0 && got <= gen) {
		return booked, f, nil
	}
	u, err := t.Usage(id)
	if err != nil {
		f.Close()
		return Usage{}, nil, err
	}
	return u, f, nil
}

// markIntent records in f, before the tree changes, that the change is to be booked as
// generation gen+1.
func markIntent(f *os.File, gen int64) error {
	s := strconv.FormatInt(gen+1, 10)
	if _, err := f.WriteAt([]byte(strings.Repeat(" ", intentWidth-len(s))+s), 0); err != nil {
		return fmt.Errorf("record the intent of a change: %w", err)
	}
	return nil
}

// Intent is the intent of one upload, found by Intents.
type Intent struct {
	ID  uuid.UUID
	Gen int64
	// Age is how long ago it was written.
	Age time.Duration
}

// Intents lists the intents on disk older than minAge, for a sweep to settle those of
// changes that died (one generation above the books).
func (t *Tree) Intents(minAge time.Duration) ([]Intent, error) {
	matches, err := filepath.Glob(filepath.Join(t.base, "*", intentFile))
	if err != nil {
		return nil, err
	}
	var out []Intent
	for _, m := range matches {
		id, err := uuid.Parse(filepath.Base(filepath.Dir(m)))
		if err != nil {
			continue
		}
		fi, err := os.Lstat(m)
		if err != nil || !fi.Mode().IsRegular() || time.Since(fi.ModTime()) < minAge {
			continue
		}
		f, err := os.Open(m)
		if err != nil {
			continue
		}
		gen, empty, err := readIntent(f)
		f.Close()
		if err != nil || empty {
			continue
		}
		out = append(out, Intent{ID: id, Gen: gen, Age: time.Since(fi.ModTime())})
	}
	return out, nil
}

// Settle books the usage measured on disk for upload id, under g's lock, when its intent
// shows that the change after the booked generation died halfway; it is how a sweep
// repairs the books of an upload that nobody changes any more.
func (t *Tree) Settle(id string, g Guard) error {
	unlock := t.lock(id)
	defer unlock()
	return g.Locked(func(booked Usage, gen int64) (Usage, error) {
		u, f, err := t.settle(id, booked, gen)
		if err != nil {
			return Usage{}, err
		}
		f.Close()
		return u, nil
	})
}

// Recount books the usage measured on disk for upload id under g's lock, whatever the
// books say.
func (t *Tree) Recount(id string, g Guard) error {
	unlock := t.lock(id)
	defer unlock()
	return g.Locked(func(Usage, int64) (Usage, error) { return t.Usage(id) })
}
