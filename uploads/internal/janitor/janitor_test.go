package janitor_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/uploads/internal/files"
	"github.com/berth-project/berth/uploads/internal/guard"
	"github.com/berth-project/berth/uploads/internal/janitor"
	"github.com/berth-project/berth/uploads/internal/store"
	"github.com/berth-project/berth/uploads/internal/store/storetest"
	"github.com/google/uuid"
)

// What a kill -9 leaves, made by hand, and repaired by one sweep: a deletion stopped after
// its tombstone with half of a 1,500-file tree still there, a tree whose create died
// before its row, and a change whose process died between the tree and the booking.
func TestSweepRepairsWhatCrashesLeave(t *testing.T) {
	for name, open := range storetest.ReplicaBackends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			dataDir := t.TempDir()
			st := open(t, dataDir, 1)[0]
			tree, err := files.New(dataDir)
			if err != nil {
				t.Fatal(err)
			}
			newUpload := func(n int) uuid.UUID {
				id := uuid.New()
				if err := tree.Create(id.String()); err != nil {
					t.Fatal(err)
				}
				if _, err := st.Insert(ctx, id); err != nil {
					t.Fatal(err)
				}
				g := guard.New(ctx, st, id, files.Limits{}, store.StatusOpen)
				for i := range n {
					if _, err := tree.Put(id.String(), fmt.Sprintf("d%d/f%d", i%10, i), strings.NewReader("data"), 4, 4, g); err != nil {
						t.Fatal(err)
					}
				}
				return id
			}

			// A deletion killed halfway: tombstone written, 700 of 1,500 files gone.
			// (Its files are written directly: their books do not matter any more.)
			deleting := newUpload(0)
			for i := range 1500 {
				p := filepath.Join(tree.Dir(deleting.String()), fmt.Sprintf("d%d", i%10), fmt.Sprintf("f%d", i))
				if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte("data"), 0o640); err != nil {
					t.Fatal(err)
				}
			}
			if found, err := st.Tombstone(ctx, deleting); !found || err != nil {
				t.Fatal(found, err)
			}
			for i := range 7 {
				if err := os.RemoveAll(filepath.Join(tree.Dir(deleting.String()), fmt.Sprintf("d%d", i))); err != nil {
					t.Fatal(err)
				}
			}

			// A create killed between the tree and the row.
			orphan := uuid.New()
			if err := tree.Create(orphan.String()); err != nil {
				t.Fatal(err)
			}

			// A PUT killed after its rename, before its booking: the file and the intent
			// are on disk, the books do not know.
			unbooked := newUpload(2)
			u, _ := st.Get(ctx, unbooked)
			if err := os.WriteFile(filepath.Join(tree.Dir(unbooked.String()), "late"), []byte("123456"), 0o640); err != nil {
				t.Fatal(err)
			}
			intent := filepath.Join(dataDir, "uploads", unbooked.String(), "intent")
			if err := os.WriteFile(intent, []byte(fmt.Sprintf("%20d", u.UsageGen+1)), 0o640); err != nil {
				t.Fatal(err)
			}

			// A create of an older version killed between the row and the tree.
			treeless := uuid.New()
			if _, err := st.Insert(ctx, treeless); err != nil {
				t.Fatal(err)
			}

			healthy := newUpload(3)
			sw := &janitor.Sweeper{Store: st, Tree: tree, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Grace: -time.Hour}
			r, err := sw.Sweep(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if r != (janitor.Report{Deleted: 1, Orphans: 1, Settled: 1, Completed: 1}) {
				t.Fatalf("report %+v", r)
			}
			for _, id := range []uuid.UUID{deleting, orphan} {
				if _, err := os.Stat(filepath.Join(dataDir, "uploads", id.String())); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("tree of %s still there: %v", id, err)
				}
			}
			if !tree.Exists(treeless.String()) {
				t.Fatal("the row without a tree got none")
			}
			if u, err := tree.Usage(treeless.String()); err != nil || u != (files.Usage{}) {
				t.Fatalf("completed tree: %+v %v", u, err)
			}
			rows, err := st.Lookup(ctx, []uuid.UUID{deleting, orphan, unbooked, healthy})
			if err != nil || len(rows) != 2 {
				t.Fatalf("rows %v %v", rows, err)
			}
			if got := rows[unbooked]; got.Bytes != 14 || got.Files != 3 {
				t.Fatalf("books of the interrupted change: %d bytes in %d files, want 14 in 3", got.Bytes, got.Files)
			}
			if got := rows[healthy]; got.Bytes != 12 || got.Files != 3 {
				t.Fatalf("books of an untouched upload: %+v", got)
			}
			in, _ := tree.Intents(0)
			for _, i := range in {
				if i.Gen > rows[i.ID].UsageGen {
					t.Fatalf("intent %+v above the books of %+v", i, rows[i.ID])
				}
			}
			// Nothing more to do: a second sweep is a no-op.
			if r, err := sw.Sweep(ctx); err != nil || r != (janitor.Report{}) {
				t.Fatalf("second sweep %+v %v", r, err)
			}
		})
	}
}
