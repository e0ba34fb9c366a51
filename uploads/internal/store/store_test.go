package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/berth-project/berth/uploads/internal/store"
	"github.com/berth-project/berth/uploads/internal/store/storetest"
	"github.com/google/uuid"
)

func TestStore(t *testing.T) {
	for name, open := range storetest.Backends(t) {
		t.Run(name, func(t *testing.T) {
			t.Run("Lifecycle", func(t *testing.T) { testLifecycle(t, open(t)) })
			t.Run("ListPaging", func(t *testing.T) { testListPaging(t, open(t)) })
			t.Run("Mutate", func(t *testing.T) { testMutate(t, open(t)) })
			t.Run("Tombstone", func(t *testing.T) { testTombstone(t, open(t)) })
			t.Run("ClaimOnce", func(t *testing.T) { testClaimOnce(t, open(t)) })
			t.Run("LeaseAndRelease", func(t *testing.T) { testLeaseAndRelease(t, open(t)) })
			t.Run("Images", func(t *testing.T) { testImages(t, open(t)) })
		})
	}
}

func TestMigrationsIdempotent(t *testing.T) {
	dir := t.TempDir()
	for i := 0; i < 2; i++ {
		s, err := store.Open(context.Background(), "sqlite://"+filepath.Join(dir, "x.db"), "")
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		s.Close()
	}
	if _, err := store.Open(context.Background(), "mysql://x", ""); err == nil {
		t.Fatal("unsupported scheme accepted")
	}
}

func testLifecycle(t *testing.T, s store.Store) {
	ctx := context.Background()
	u, err := s.Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if u.Status != store.StatusOpen || u.FilesTotal != nil || u.CreatedAt.IsZero() {
		t.Fatalf("created %+v", u)
	}
	got, err := s.Get(ctx, u.ID)
	if err != nil || got.ID != u.ID || got.Status != store.StatusOpen {
		t.Fatalf("get = %+v, %v", got, err)
	}
	if _, err := s.Get(ctx, uuid.New()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get unknown = %v", err)
	}
	if _, _, err := s.Errors(ctx, u.ID, 10, 0); !errors.Is(err, store.ErrState) {
		t.Fatalf("errors while open = %v", err)
	}
	if _, err := s.MarkForProcessing(ctx, uuid.New()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("mark unknown = %v", err)
	}
	m, err := s.MarkForProcessing(ctx, u.ID)
	if err != nil || m.Status != store.StatusPending {
		t.Fatalf("mark = %+v, %v", m, err)
	}
	var se *store.StateError
	if _, err := s.MarkForProcessing(ctx, u.ID); !errors.As(err, &se) || se.Status != store.StatusPending {
		t.Fatalf("mark twice = %v", err)
	}
	c, ok, err := s.Claim(ctx, "w1", time.Minute)
	if err != nil || !ok || c.ID != u.ID || c.Status != store.StatusProcessing {
		t.Fatalf("claim = %+v %v %v", c, ok, err)
	}
	if err := s.SetTotal(ctx, u.ID, "w1", 3); err != nil {
		t.Fatal(err)
	}
	if err := s.SetTotal(ctx, u.ID, "w1", 4); !errors.Is(err, store.ErrLostClaim) {
		t.Fatalf("second SetTotal = %v", err)
	}
	if err := s.RecordFile(ctx, u.ID, "w1", 0, &store.FileError{File: "a", Message: "unsupported file type"}, nil, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordFile(ctx, u.ID, "w1", 0, &store.FileError{File: "a", Message: "again"}, nil, time.Minute); !errors.Is(err, store.ErrLostClaim) {
		t.Fatalf("recording a file twice = %v", err)
	}
	if err := s.RecordFile(ctx, u.ID, "w2", 1, nil, nil, time.Minute); !errors.Is(err, store.ErrLostClaim) {
		t.Fatalf("record by non-owner = %v", err)
	}
	if err := s.RecordFile(ctx, u.ID, "w1", 1, nil, nil, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordFile(ctx, u.ID, "w1", 2, &store.FileError{File: "c", Message: "boom"}, nil, time.Minute); err != nil {
		t.Fatal(err)
	}
	errs, total, err := s.Errors(ctx, u.ID, 10, 0)
	if err != nil || total != 2 || len(errs) != 2 || errs[0].File != "a" || errs[1] != (store.FileError{"c", "boom"}) {
		t.Fatalf("errors = %v %d %v", errs, total, err)
	}
	if errs, _, _ := s.Errors(ctx, u.ID, 1, 1); len(errs) != 1 || errs[0].File != "c" {
		t.Fatalf("errors page = %v", errs)
	}
	if err := s.Finish(ctx, u.ID, "w1"); err != nil {
		t.Fatal(err)
	}
	d, _ := s.Get(ctx, u.ID)
	if d.Status != store.StatusDone || *d.FilesTotal != 3 || d.FilesProcessed != 3 || d.Errors != 2 {
		t.Fatalf("done = %+v", d)
	}
	counts, err := s.CountByStatus(ctx)
	if err != nil || counts[store.StatusDone] != 1 {
		t.Fatalf("counts = %v %v", counts, err)
	}
	if err := s.Delete(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, u.ID); err != nil {
		t.Fatalf("delete twice = %v", err)
	}
	if _, err := s.Get(ctx, u.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get deleted = %v", err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

func testListPaging(t *testing.T, s store.Store) {
	ctx := context.Background()
	var ids []uuid.UUID
	for i := 0; i < 7; i++ {
		u, err := s.Create(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, u.ID)
		time.Sleep(time.Millisecond)
	}
	seen := map[uuid.UUID]bool{}
	for off := 0; off < 9; off += 3 {
		page, total, err := s.List(ctx, 3, off)
		if err != nil || total != 7 {
			t.Fatalf("list = %d %v", total, err)
		}
		for _, u := range page {
			if seen[u.ID] {
				t.Fatalf("%s listed twice", u.ID)
			}
			seen[u.ID] = true
		}
	}
	if len(seen) != 7 {
		t.Fatalf("listed %d of 7", len(seen))
	}
	page, _, _ := s.List(ctx, 3, 0)
	if page[0].ID != ids[0] {
		t.Fatalf("not oldest first")
	}
}

// testMutate: the lock serializes read-modify-write of the books (no lost update, even
// with a delay inside), each booking raises the generation, a failing fn books nothing,
// and tombstoned or unknown uploads are ErrNotFound. Large sizes (beyond 32 bits) fit.
func testMutate(t *testing.T, s store.Store) {
	ctx := context.Background()
	u, _ := s.Create(ctx)
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.Mutate(ctx, u.ID, func(cur store.Upload) (store.Usage, error) {
				time.Sleep(time.Millisecond) // a read-modify-write without the lock would lose updates
				return store.Usage{Bytes: cur.Bytes + 5<<30, Files: cur.Files + 1}, nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got, _ := s.Get(ctx, u.ID)
	if got.Bytes != 20*5<<30 || got.Files != 20 || got.UsageGen != 20 {
		t.Fatalf("after 20 concurrent changes: %d bytes, %d files, generation %d", got.Bytes, got.Files, got.UsageGen)
	}
	boom := errors.New("boom")
	if err := s.Mutate(ctx, u.ID, func(store.Upload) (store.Usage, error) { return store.Usage{}, boom }); !errors.Is(err, boom) {
		t.Fatalf("failing fn = %v", err)
	}
	if again, _ := s.Get(ctx, u.ID); again.Bytes != got.Bytes || again.UsageGen != got.UsageGen {
		t.Fatalf("a failing fn booked %+v", again)
	}
	if err := s.Mutate(ctx, uuid.New(), func(store.Upload) (store.Usage, error) { return store.Usage{}, nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("mutate unknown = %v", err)
	}
	if total, err := s.TotalBytes(ctx); err != nil || total != 20*5<<30 {
		t.Fatalf("total bytes = %d %v", total, err)
	}
	if found, err := s.Tombstone(ctx, u.ID); !found || err != nil {
		t.Fatalf("tombstone = %v %v", found, err)
	}
	if err := s.Mutate(ctx, u.ID, func(store.Upload) (store.Usage, error) { return store.Usage{}, nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("mutate tombstoned = %v", err)
	}
}

// testTombstone: a tombstoned upload is invisible to Get, List, counts and claims, listed
// by Deleting and Lookup, and gone after Delete.
func testTombstone(t *testing.T, s store.Store) {
	ctx := context.Background()
	keep, _ := s.Create(ctx)
	u, _ := s.Create(ctx)
	if _, err := s.MarkForProcessing(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	if found, err := s.Tombstone(ctx, uuid.New()); found || err != nil {
		t.Fatalf("tombstone unknown = %v %v", found, err)
	}
	if found, err := s.Tombstone(ctx, u.ID); !found || err != nil {
		t.Fatalf("tombstone = %v %v", found, err)
	}
	if _, err := s.Get(ctx, u.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get tombstoned = %v", err)
	}
	if list, total, err := s.List(ctx, 10, 0); err != nil || total != 1 || len(list) != 1 || list[0].ID != keep.ID {
		t.Fatalf("list = %v %d %v", list, total, err)
	}
	if counts, _ := s.CountByStatus(ctx); counts[store.StatusPending] != 0 || counts[store.StatusDeleting] != 0 {
		t.Fatalf("counts = %v", counts)
	}
	if _, ok, err := s.Claim(ctx, "w", time.Minute); ok || err != nil {
		t.Fatalf("claimed a tombstone: %v %v", ok, err)
	}
	if _, err := s.MarkForProcessing(ctx, u.ID); err == nil {
		t.Fatal("marked a tombstone")
	}
	if ids, err := s.Deleting(ctx, 10); err != nil || len(ids) != 1 || ids[0] != u.ID {
		t.Fatalf("deleting = %v %v", ids, err)
	}
	rows, err := s.Lookup(ctx, []uuid.UUID{u.ID, keep.ID, uuid.New()})
	if err != nil || len(rows) != 2 || rows[u.ID].Status != store.StatusDeleting {
		t.Fatalf("lookup = %v %v", rows, err)
	}
	if err := s.Delete(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	if ids, _ := s.Deleting(ctx, 10); len(ids) != 0 {
		t.Fatalf("deleting after delete = %v", ids)
	}
}

func testClaimOnce(t *testing.T, s store.Store) {
	ctx := context.Background()
	const n = 10
	for i := 0; i < n; i++ {
		u, _ := s.Create(ctx)
		if _, err := s.MarkForProcessing(ctx, u.ID); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	claimed := map[uuid.UUID]int{}
	var wg sync.WaitGroup
	for w := 0; w < 5; w++ {
		wg.Add(1)
		go func(owner string) {
			defer wg.Done()
			for {
				u, ok, err := s.Claim(ctx, owner, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					return
				}
				mu.Lock()
				claimed[u.ID]++
				mu.Unlock()
			}
		}(uuid.NewString())
	}
	wg.Wait()
	if len(claimed) != n {
		t.Fatalf("claimed %d of %d", len(claimed), n)
	}
	for id, c := range claimed {
		if c != 1 {
			t.Fatalf("%s claimed %d times", id, c)
		}
	}
}

func testLeaseAndRelease(t *testing.T, s store.Store) {
	ctx := context.Background()
	u, _ := s.Create(ctx)
	s.MarkForProcessing(ctx, u.ID)
	// The lease is long enough that a loaded machine does not run it out
	// between two calls; the claims after it are polled for, and must not
	// come before it ends.
	const lease = time.Second
	claimed := time.Now()
	if _, ok, _ := s.Claim(ctx, "a", lease); !ok {
		t.Fatal("no claim")
	}
	if _, ok, _ := s.Claim(ctx, "b", time.Minute); ok {
		t.Fatal("claimed while leased")
	}
	c := claimWhenFree(t, s, "b", claimed.Add(lease))
	if c.ID != u.ID {
		t.Fatalf("reclaim after lease got %s, want %s", c.ID, u.ID)
	}
	if err := s.Renew(ctx, u.ID, "a", time.Minute); !errors.Is(err, store.ErrLostClaim) {
		t.Fatalf("old owner renew = %v", err)
	}
	retry := time.Now().Add(lease)
	if err := s.Release(ctx, u.ID, "b", retry); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Claim(ctx, "c", time.Minute); ok {
		t.Fatal("claimed before retry time")
	}
	c = claimWhenFree(t, s, "c", retry)
	if c.Attempts != 1 {
		t.Fatalf("claim after retry time = %+v", c)
	}
	if err := s.Finish(ctx, u.ID, "b"); !errors.Is(err, store.ErrLostClaim) {
		t.Fatalf("finish by old owner = %v", err)
	}
}

// claimWhenFree claims for owner as soon as the store lets it, which must
// not be before notBefore (to the microsecond the store keeps).
func claimWhenFree(t *testing.T, s store.Store, owner string, notBefore time.Time) store.Upload {
	t.Helper()
	notBefore = notBefore.Truncate(time.Microsecond)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c, ok, err := s.Claim(context.Background(), owner, time.Minute)
		if err != nil {
			t.Fatalf("claim for %s: %v", owner, err)
		}
		if ok {
			if now := time.Now(); now.Before(notBefore) {
				t.Fatalf("%s claimed %v before the lease or retry time ran out", owner, notBefore.Sub(now))
			}
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s could not claim within 10s after the lease or retry time", owner)
		}
	}
}

// The image names of a file are recorded with its progress: once, in file order, only by
// the claim's owner, listed page by page while processing and when done.
func testImages(t *testing.T, s store.Store) {
	ctx := context.Background()
	u, err := s.Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Images(ctx, u.ID, 10, 0); !errors.Is(err, store.ErrState) {
		t.Fatalf("images while open = %v", err)
	}
	if _, _, err := s.Images(ctx, uuid.New(), 10, 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("images of unknown upload = %v", err)
	}
	if _, err := s.MarkForProcessing(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Images(ctx, u.ID, 10, 0); !errors.Is(err, store.ErrState) {
		t.Fatalf("images while pending = %v", err)
	}
	if _, ok, err := s.Claim(ctx, "w1", time.Minute); !ok || err != nil {
		t.Fatalf("claim = %v %v", ok, err)
	}
	if err := s.SetTotal(ctx, u.ID, "w1", 3); err != nil {
		t.Fatal(err)
	}
	if got, total, err := s.Images(ctx, u.ID, 10, 0); err != nil || total != 0 || got == nil || len(got) != 0 {
		t.Fatalf("images before any file = %v %d %v", got, total, err)
	}
	a := []store.DeployedImage{{File: "a.tar", Name: "localhost/one:latest"}, {File: "a.tar", Name: "localhost/two:1"}}
	if err := s.RecordFile(ctx, u.ID, "w1", 0, nil, a, time.Minute); err != nil {
		t.Fatal(err)
	}
	// A second recording of the same file (a worker that lost its claim) adds nothing.
	if err := s.RecordFile(ctx, u.ID, "w1", 0, nil, a, time.Minute); !errors.Is(err, store.ErrLostClaim) {
		t.Fatalf("recording a file twice = %v", err)
	}
	if err := s.RecordFile(ctx, u.ID, "w2", 1, nil, []store.DeployedImage{{File: "b.tar", Name: "x"}}, time.Minute); !errors.Is(err, store.ErrLostClaim) {
		t.Fatalf("record by non-owner = %v", err)
	}
	if err := s.RecordFile(ctx, u.ID, "w1", 1, &store.FileError{File: "bad.tar", Message: "refused"}, nil, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordFile(ctx, u.ID, "w1", 2, nil, []store.DeployedImage{{File: "c.tar.gz", Name: "localhost/three:latest"}}, time.Minute); err != nil {
		t.Fatal(err)
	}
	want := []store.DeployedImage{a[0], a[1], {File: "c.tar.gz", Name: "localhost/three:latest"}}
	got, total, err := s.Images(ctx, u.ID, 10, 0)
	if err != nil || total != 3 || len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("images = %v %d %v, want %v", got, total, err, want)
	}
	if got, total, _ := s.Images(ctx, u.ID, 1, 1); total != 3 || len(got) != 1 || got[0] != want[1] {
		t.Fatalf("images page = %v %d", got, total)
	}
	if got, total, _ := s.Images(ctx, u.ID, 10, 5); total != 3 || len(got) != 0 {
		t.Fatalf("images past the end = %v %d", got, total)
	}
	if err := s.Finish(ctx, u.ID, "w1"); err != nil {
		t.Fatal(err)
	}
	d, err := s.Get(ctx, u.ID)
	if err != nil || d.Images != 3 || d.Errors != 1 {
		t.Fatalf("done = %+v %v", d, err)
	}
	if got, total, err := s.Images(ctx, u.ID, 10, 0); err != nil || total != 3 || len(got) != 3 {
		t.Fatalf("images when done = %v %d %v", got, total, err)
	}
}

// A PostgreSQL session of the service ends a transaction left idle (its replica's host
// gone without closing the connection) after a minute, freeing the upload's lock.
func TestPostgresIdleTransactionTimeout(t *testing.T) {
	open, ok := storetest.Backends(t)["postgres"]
	if !ok {
		t.Skip("no PostgreSQL")
	}
	s := open(t)
	var setting string
	if err := store.QueryRowForTest(s, `SHOW idle_in_transaction_session_timeout`, &setting); err != nil {
		t.Fatal(err)
	}
	if setting != "1min" {
		t.Fatalf("idle_in_transaction_session_timeout = %q, want 1min", setting)
	}
}
