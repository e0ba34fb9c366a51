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
			t.Run("Reserve", func(t *testing.T) { testReserve(t, open(t)) })
			t.Run("ReserveLargeLimits", func(t *testing.T) { testReserveLargeLimits(t, open(t)) })
			t.Run("ReserveNeedsOpen", func(t *testing.T) { testReserveNeedsOpen(t, open(t)) })
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

func testReserve(t *testing.T, s store.Store) {
	ctx := context.Background()
	u, _ := s.Create(ctx)
	lim := store.Limits{MaxBytes: 100, MaxFiles: 3}
	var le *store.LimitError
	if err := s.Reserve(ctx, u.ID, 60, 1, lim); err != nil {
		t.Fatal(err)
	}
	if err := s.Reserve(ctx, u.ID, 41, 1, lim); !errors.As(err, &le) || le.Limit != "maxUploadSize" {
		t.Fatalf("over size = %v", err)
	}
	if err := s.Reserve(ctx, u.ID, 10, 2, lim); err != nil {
		t.Fatal(err)
	}
	if err := s.Reserve(ctx, u.ID, 1, 1, lim); !errors.As(err, &le) || le.Limit != "maxFiles" {
		t.Fatalf("over count = %v", err)
	}
	if err := s.Reserve(ctx, u.ID, -70, -3, lim); err != nil {
		t.Fatal(err)
	}
	// Concurrent reservations never overshoot.
	var wg sync.WaitGroup
	var mu sync.Mutex
	okCount := 0
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s.Reserve(ctx, u.ID, 10, 1, store.Limits{MaxBytes: 100, MaxFiles: 100}) == nil {
				mu.Lock()
				okCount++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	got, _ := s.Get(ctx, u.ID)
	if okCount != 10 || got.Bytes != 100 || got.Files != 10 {
		t.Fatalf("concurrent reserve: %d ok, usage %d bytes %d files", okCount, got.Bytes, got.Files)
	}
	if err := s.Reserve(ctx, uuid.New(), 1, 1, lim); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("reserve unknown = %v", err)
	}
	s.MarkForProcessing(ctx, u.ID)
	if err := s.Reserve(ctx, u.ID, 1, 0, lim); !errors.Is(err, store.ErrState) {
		t.Fatalf("reserve pending = %v", err)
	}
	if total, err := s.TotalBytes(ctx); err != nil || total != 100 {
		t.Fatalf("total bytes = %d %v", total, err)
	}
}

// testReserveLargeLimits uses the service's default limits (16 GiB per upload), which
// are beyond the range of a 32-bit integer, and a reservation of several GiB.
func testReserveLargeLimits(t *testing.T, s store.Store) {
	ctx := context.Background()
	u, _ := s.Create(ctx)
	lim := store.Limits{MaxBytes: 16 << 30, MaxFiles: 10000}
	if err := s.Reserve(ctx, u.ID, 1, 1, lim); err != nil {
		t.Fatalf("reserve 1 byte under a 16 GiB limit: %v", err)
	}
	if err := s.Reserve(ctx, u.ID, 5<<30, 1, lim); err != nil {
		t.Fatalf("reserve 5 GiB: %v", err)
	}
	var le *store.LimitError
	if err := s.Reserve(ctx, u.ID, 11<<30, 1, lim); !errors.As(err, &le) || le.Limit != "maxUploadSize" || le.Max != 16<<30 {
		t.Fatalf("reserve past 16 GiB = %v", err)
	}
	if err := s.Reserve(ctx, u.ID, 1, 1, store.Limits{MaxBytes: 1 << 40, MaxFiles: 1 << 40}); err != nil {
		t.Fatalf("reserve under 1 TiB limits: %v", err)
	}
	got, _ := s.Get(ctx, u.ID)
	if got.Bytes != 5<<30+2 || got.Files != 3 {
		t.Fatalf("usage %d bytes %d files", got.Bytes, got.Files)
	}
}

// testReserveNeedsOpen: once an upload left open, no write may be booked, not even one
// that shrinks it (a file replaced by a smaller one); Unreserve still books a freeing.
func testReserveNeedsOpen(t *testing.T, s store.Store) {
	ctx := context.Background()
	u, _ := s.Create(ctx)
	lim := store.Limits{MaxBytes: 100, MaxFiles: 3}
	if err := s.Reserve(ctx, u.ID, 50, 2, lim); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MarkForProcessing(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		bytes int64
		files int
	}{{0, 0}, {-10, 0}, {-10, -1}} {
		if err := s.Reserve(ctx, u.ID, c.bytes, c.files, lim); !errors.Is(err, store.ErrState) {
			t.Fatalf("reserve %+v on a pending upload = %v, want ErrState", c, err)
		}
	}
	if err := s.Unreserve(ctx, u.ID, -20, -1); err != nil {
		t.Fatalf("release on a pending upload: %v", err)
	}
	if got, _ := s.Get(ctx, u.ID); got.Bytes != 30 || got.Files != 1 {
		t.Fatalf("usage %d bytes %d files, want 30, 1", got.Bytes, got.Files)
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
