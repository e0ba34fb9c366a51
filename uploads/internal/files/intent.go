package files

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// An intent records, before a change of an upload's tree, that the change may be on disk
// without being booked: a process killed between the change and the booking's commit, or
// a booking that failed (the database went away), leaves it behind. It is the file
// .intents/<id>.<gen> where gen is the generation the change would have been booked
// with; the next change of the upload (whoever makes it, under the shared lock) finds
// it and recounts the usage from the disk instead of trusting the books.
type intent struct{ path string }

func (t *Tree) intentPath(id string, gen int64) string {
	return filepath.Join(t.base, intentsDir, id+"."+strconv.FormatInt(gen, 10))
}

// beginIntent creates the intent of the change to be booked after generation gen.
func (t *Tree) beginIntent(id string, gen int64) (intent, error) {
	p := t.intentPath(id, gen+1)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return intent{}, fmt.Errorf("record the intent of a change: %w", err)
	}
	return intent{path: p}, f.Close()
}

// end removes the intent when done (the change is booked, or the tree was left as it
// was); otherwise it stays for the next change to settle.
func (in intent) end(done bool) {
	if in.path != "" && done {
		_ = os.Remove(in.path)
	}
}

// settle returns the usage a change of upload id must start from: the books, unless the
// change after generation gen left an intent (it died or failed to book after touching
// the tree), in which case the usage measured on disk. It runs under the shared lock.
func (t *Tree) settle(id string, booked Usage, gen int64) (Usage, error) {
	if _, err := os.Lstat(t.intentPath(id, gen+1)); errors.Is(err, fs.ErrNotExist) {
		return booked, nil
	}
	return t.Usage(id)
}

// Intent is an intent file found by Intents.
type Intent struct {
	ID  uuid.UUID
	Gen int64
	// Age is how long ago it was written.
	Age time.Duration
}

// Intents lists the intents on disk, for a sweep to settle those of dead changes and
// remove those already booked or of uploads that are gone.
func (t *Tree) Intents() ([]Intent, error) {
	entries, err := os.ReadDir(filepath.Join(t.base, intentsDir))
	if err != nil {
		return nil, err
	}
	var out []Intent
	for _, e := range entries {
		idPart, genPart, ok := strings.Cut(e.Name(), ".")
		id, err1 := uuid.Parse(idPart)
		gen, err2 := strconv.ParseInt(genPart, 10, 64)
		info, err3 := e.Info()
		if !ok || err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		out = append(out, Intent{ID: id, Gen: gen, Age: time.Since(info.ModTime())})
	}
	return out, nil
}

// DropIntent removes the intent of upload id for generation gen.
func (t *Tree) DropIntent(id string, gen int64) {
	_ = os.Remove(t.intentPath(id, gen))
}

// Settle books the usage measured on disk for upload id, under g's lock, when an intent
// shows that the change after the booked generation died halfway; it is how a sweep
// repairs the books of an upload that nobody changes any more.
func (t *Tree) Settle(id string, g Guard) error {
	unlock := t.lock(id)
	defer unlock()
	var booked int64 = -1
	err := g.Locked(func(u Usage, gen int64) (Usage, error) {
		booked = gen + 1
		return t.settle(id, u, gen)
	})
	if err == nil {
		// Booked as generation gen+1 now, the intent of that generation is stale.
		t.DropIntent(id, booked)
	}
	return err
}
