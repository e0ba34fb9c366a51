package processor_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-project/berth/uploads/internal/files"
	"github.com/berth-project/berth/uploads/internal/guard"
	"github.com/berth-project/berth/uploads/internal/processor"
	"github.com/berth-project/berth/uploads/internal/store"
	"github.com/berth-project/berth/uploads/internal/store/storetest"
	"github.com/google/uuid"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// recorder is a Deployer that logs its calls and lets a test decide each outcome. It
// deploys files in lexical order, or in the order reorder gives. A file deployed without
// error loaded one image, named after the file.
type recorder struct {
	mu      sync.Mutex
	calls   []string
	decide  func(ctx context.Context, rel string, n int) error
	reorder func(files []string) []string
}

func (r *recorder) Plan(dir string, files []string) (processor.Plan, error) {
	order := files
	if r.reorder != nil {
		order = r.reorder(append([]string(nil), files...))
	}
	return &recorderPlan{r: r, dir: dir, files: order}, nil
}

type recorderPlan struct {
	r     *recorder
	dir   string
	files []string
}

func (p *recorderPlan) Files() []string { return p.files }

func (p *recorderPlan) Deploy(ctx context.Context, rel string) ([]string, error) {
	r := p.r
	r.mu.Lock()
	r.calls = append(r.calls, rel)
	n := 0
	for _, c := range r.calls {
		if c == rel {
			n++
		}
	}
	r.mu.Unlock()
	if _, err := os.Stat(filepath.Join(p.dir, filepath.FromSlash(rel))); err != nil {
		return nil, fmt.Errorf("file %q not in the planned tree: %w", rel, err)
	}
	if r.decide == nil {
		return nil, processor.ErrUnsupported
	}
	if err := r.decide(ctx, rel, n); err != nil {
		return []string{"not-recorded-" + rel}, err
	}
	return []string{"localhost/img-" + rel + ":latest"}, nil
}

func (r *recorder) Calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

type fixture struct {
	st   store.Store
	tree *files.Tree
}

func newUpload(t *testing.T, f fixture, names ...string) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	u, err := f.st.Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.tree.Create(u.ID.String()); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		_, err := f.tree.Put(u.ID.String(), n, strings.NewReader(n), int64(len(n)), 1<<20, guard.New(ctx, f.st, u.ID, files.Limits{}))
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.st.MarkForProcessing(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	return u.ID
}

func waitDone(t *testing.T, st store.Store, id uuid.UUID) store.Upload {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		u, err := st.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if u.Status == store.StatusDone {
			return u
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("upload %s not done in time", id)
	return store.Upload{}
}

func errorsOf(t *testing.T, st store.Store, id uuid.UUID) []store.FileError {
	t.Helper()
	errs, _, err := st.Errors(context.Background(), id, 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	return errs
}

func TestProcessor(t *testing.T) {
	for name, open := range storetest.Backends(t) {
		t.Run(name, func(t *testing.T) {
			mk := func(t *testing.T) fixture {
				tree, err := files.New(t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				return fixture{st: open(t), tree: tree}
			}
			t.Run("UnsupportedEverything", func(t *testing.T) { testUnsupported(t, mk(t)) })
			t.Run("RestartMidway", func(t *testing.T) { testRestart(t, mk(t)) })
			t.Run("StopWhileRecording", func(t *testing.T) { testStopWhileRecording(t, mk(t)) })
			t.Run("CrashResume", func(t *testing.T) { testCrashResume(t, mk(t)) })
			t.Run("Unavailable", func(t *testing.T) { testUnavailable(t, mk(t)) })
			t.Run("ReplicasNeverShare", func(t *testing.T) { testReplicas(t, mk(t)) })
			t.Run("PanickingDeployer", func(t *testing.T) { testPanic(t, mk(t)) })
			t.Run("PlannedOrderResumes", func(t *testing.T) { testPlannedOrder(t, mk(t)) })
			t.Run("BundledFiles", func(t *testing.T) { testBundled(t, mk(t)) })
		})
	}
}

func run(t *testing.T, w *processor.Worker) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	return func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("worker did not stop")
		}
	}
}

func testUnsupported(t *testing.T, f fixture) {
	id := newUpload(t, f, "b/z.bin", "a.txt", "b/a.tar")
	empty := newUpload(t, f)
	var observed int
	var mu sync.Mutex
	w := processor.New(quiet, f.st, f.tree, processor.Unsupported{}, processor.Config{PollInterval: 10 * time.Millisecond,
		Observe: func(time.Duration) { mu.Lock(); observed++; mu.Unlock() }})
	defer run(t, w)()
	u := waitDone(t, f.st, id)
	if *u.FilesTotal != 3 || u.FilesProcessed != 3 || u.Errors != 3 {
		t.Fatalf("done upload = %+v", u)
	}
	want := []store.FileError{{File: "a.txt", Message: "unsupported file type"}, {File: "b/a.tar", Message: "unsupported file type"}, {File: "b/z.bin", Message: "unsupported file type"}}
	if got := errorsOf(t, f.st, id); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("errors = %v", got)
	}
	e := waitDone(t, f.st, empty)
	if *e.FilesTotal != 0 || e.Errors != 0 {
		t.Fatalf("empty upload = %+v", e)
	}
	// The worker observes a run after the store has marked its upload done, so the
	// second observation may still be on its way: wait for it, then make sure no
	// third one follows.
	count := func() int { mu.Lock(); defer mu.Unlock(); return observed }
	deadline := time.Now().Add(5 * time.Second)
	for count() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	if n := count(); n != 2 {
		t.Fatalf("observed %d runs, want 2", n)
	}
}

// stopMidway runs a worker deploying with rec until rec's deploy closes
// blocked, busy with a file, and stops the worker there.
func stopMidway(t *testing.T, f fixture, rec *recorder, blocked <-chan struct{}) {
	t.Helper()
	stop := run(t, processor.New(quiet, f.st, f.tree, rec, processor.Config{PollInterval: 10 * time.Millisecond, Lease: time.Hour}))
	<-blocked
	stop()
}

// resume runs a worker deploying with second, after one with first was
// stopped midway, until the upload is done, and returns it; the worker
// stops when the test ends. It fails the test unless first and second
// deployed the files named, comma separated, in order.
func resume(t *testing.T, f fixture, id uuid.UUID, first *recorder, firstWant string, second *recorder, secondWant string) store.Upload {
	t.Helper()
	t.Cleanup(run(t, processor.New(quiet, f.st, f.tree, second, processor.Config{PollInterval: 10 * time.Millisecond, Lease: time.Hour})))
	u := waitDone(t, f.st, id)
	if got := strings.Join(first.Calls(), ","); got != firstWant {
		t.Fatalf("first worker deployed %s, want %s", got, firstWant)
	}
	if got := strings.Join(second.Calls(), ","); got != secondWant {
		t.Fatalf("second worker deployed %s, want %s", got, secondWant)
	}
	return u
}

// A worker stopped while deploying the second file hands the upload back; the next
// worker redoes that file only and finishes with exact counts.
func testRestart(t *testing.T, f fixture) {
	id := newUpload(t, f, "1", "2", "3", "4")
	blocked := make(chan struct{})
	first := &recorder{decide: func(ctx context.Context, rel string, _ int) error {
		if rel == "2" {
			close(blocked)
			<-ctx.Done()
			return ctx.Err()
		}
		return errors.New("engine said no")
	}}
	stopMidway(t, f, first, blocked)
	mid, _ := f.st.Get(context.Background(), id)
	if mid.Status != store.StatusProcessing || mid.FilesProcessed != 1 || *mid.FilesTotal != 4 {
		t.Fatalf("after stop: %+v", mid)
	}
	second := &recorder{decide: func(context.Context, string, int) error { return nil }}
	u := resume(t, f, id, first, "1,2", second, "2,3,4")
	if u.FilesProcessed != 4 || u.Errors != 1 {
		t.Fatalf("final %+v", u)
	}
	if errs := errorsOf(t, f.st, id); len(errs) != 1 || errs[0] != (store.FileError{File: "1", Message: "engine said no"}) {
		t.Fatalf("errors = %v", errs)
	}
	// File 2 was deployed by both workers but its images are recorded once, by the
	// worker that also recorded its progress; file 1's failure records none.
	images, total, err := f.st.Images(context.Background(), id, 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.DeployedImage{
		{File: "2", Name: "localhost/img-2:latest"},
		{File: "3", Name: "localhost/img-3:latest"},
		{File: "4", Name: "localhost/img-4:latest"},
	}
	if fmt.Sprint(images) != fmt.Sprint(want) || total != 3 || u.Images != 3 {
		t.Fatalf("images = %v (total %d, upload counts %d), want %v", images, total, u.Images, want)
	}
}

// cancelingStore stops the worker (cancels its context) while it records file number
// at, as a SIGTERM arriving during the database write would.
type cancelingStore struct {
	store.Store
	at     int
	cancel context.CancelFunc
}

func (c *cancelingStore) RecordFile(ctx context.Context, id uuid.UUID, owner string, index int, entry *store.FileError, images []store.DeployedImage, lease time.Duration) error {
	if index == c.at {
		c.cancel()
	}
	return c.Store.RecordFile(ctx, id, owner, index, entry, images, lease)
}

// A worker stopped while it records a file (not only while it deploys one) also hands
// the upload back at once: another worker resumes it without waiting for the lease.
func testStopWhileRecording(t *testing.T, f fixture) {
	id := newUpload(t, f, "1", "2", "3", "4")
	ctx, cancel := context.WithCancel(context.Background())
	cs := &cancelingStore{Store: f.st, at: 1, cancel: cancel}
	w1 := processor.New(quiet, cs, f.tree, &recorder{}, processor.Config{PollInterval: 10 * time.Millisecond, Lease: time.Hour})
	done := make(chan struct{})
	go func() { defer close(done); _ = w1.Run(ctx) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("worker did not stop")
	}
	mid, _ := f.st.Get(context.Background(), id)
	if mid.Status != store.StatusProcessing {
		t.Fatalf("after stop: %+v", mid)
	}
	if _, ok, err := f.st.Claim(context.Background(), "next-worker", time.Minute); err != nil || !ok {
		t.Fatalf("upload not handed back on stop: claim = %v, %v", ok, err)
	}
}

// A worker that died (no release) leaves its claim until the lease runs out; then a new
// worker resumes after the last recorded file.
func testCrashResume(t *testing.T, f fixture) {
	ctx := context.Background()
	id := newUpload(t, f, "a", "b", "c")
	if _, ok, err := f.st.Claim(ctx, "dead-worker", 150*time.Millisecond); !ok || err != nil {
		t.Fatal("claim", ok, err)
	}
	if err := f.st.SetTotal(ctx, id, "dead-worker", 3); err != nil {
		t.Fatal(err)
	}
	if err := f.st.RecordFile(ctx, id, "dead-worker", 0, &store.FileError{File: "a", Message: "unsupported file type"}, nil, 150*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	w := processor.New(quiet, f.st, f.tree, rec, processor.Config{PollInterval: 20 * time.Millisecond})
	defer run(t, w)()
	u := waitDone(t, f.st, id)
	if got := strings.Join(rec.Calls(), ","); got != "b,c" {
		t.Fatalf("resumed worker deployed %s", got)
	}
	if u.FilesProcessed != 3 || u.Errors != 3 || len(errorsOf(t, f.st, id)) != 3 {
		t.Fatalf("final %+v", u)
	}
}

func testUnavailable(t *testing.T, f fixture) {
	id := newUpload(t, f, "a", "b", "c")
	rec := &recorder{decide: func(_ context.Context, rel string, n int) error {
		if rel == "b" && n <= 3 {
			return fmt.Errorf("dial engine: %w", processor.ErrUnavailable)
		}
		return nil
	}}
	w := processor.New(quiet, f.st, f.tree, rec, processor.Config{PollInterval: 5 * time.Millisecond, RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond})
	start := time.Now()
	defer run(t, w)()
	u := waitDone(t, f.st, id)
	// Backoff 20ms, 40ms, 80ms between the four attempts at "b".
	if elapsed := time.Since(start); elapsed < 140*time.Millisecond {
		t.Fatalf("retries came too fast: %v", elapsed)
	}
	if got := strings.Join(rec.Calls(), ","); got != "a,b,b,b,b,c" {
		t.Fatalf("deployed %s", got)
	}
	if u.FilesProcessed != 3 || u.Errors != 0 || len(errorsOf(t, f.st, id)) != 0 {
		t.Fatalf("final %+v", u)
	}
}

func testReplicas(t *testing.T, f fixture) {
	var ids []uuid.UUID
	for i := 0; i < 6; i++ {
		ids = append(ids, newUpload(t, f, "x", "y"))
	}
	recs := []*recorder{{}, {}, {}}
	for _, r := range recs {
		slow := r
		slow.decide = func(context.Context, string, int) error {
			time.Sleep(2 * time.Millisecond)
			return processor.ErrUnsupported
		}
		w := processor.New(quiet, f.st, f.tree, slow, processor.Config{PollInterval: 5 * time.Millisecond})
		defer run(t, w)()
	}
	for _, id := range ids {
		if u := waitDone(t, f.st, id); u.FilesProcessed != 2 || u.Errors != 2 {
			t.Fatalf("final %+v", u)
		}
	}
	total := 0
	for _, r := range recs {
		total += len(r.Calls())
	}
	if total != 12 {
		t.Fatalf("%d deploy calls for 12 files", total)
	}
}

func testPanic(t *testing.T, f fixture) {
	id := newUpload(t, f, "a", "b")
	rec := &recorder{decide: func(_ context.Context, rel string, _ int) error {
		if rel == "a" {
			panic("boom")
		}
		return nil
	}}
	w := processor.New(quiet, f.st, f.tree, rec, processor.Config{PollInterval: 10 * time.Millisecond})
	defer run(t, w)()
	u := waitDone(t, f.st, id)
	errs := errorsOf(t, f.st, id)
	if u.FilesProcessed != 2 || len(errs) != 1 || errs[0].File != "a" || !strings.Contains(errs[0].Message, "boom") {
		t.Fatalf("final %+v, errors %v", u, errs)
	}
}

// Files are deployed in the plan's order, not the tree's, and a worker that stops midway
// leaves the next one to resume at the same place of that order.
func testPlannedOrder(t *testing.T, f fixture) {
	id := newUpload(t, f, "a", "b", "c", "d")
	reverse := func(files []string) []string { slices.Reverse(files); return files }
	blocked := make(chan struct{})
	first := &recorder{reorder: reverse, decide: func(ctx context.Context, rel string, _ int) error {
		if rel == "b" {
			close(blocked)
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}}
	stopMidway(t, f, first, blocked)
	second := &recorder{reorder: reverse, decide: func(context.Context, string, int) error { return nil }}
	u := resume(t, f, id, first, "d,c,b", second, "b,a")
	if u.FilesProcessed != 4 || u.Errors != 0 {
		t.Fatalf("final %+v", u)
	}
}

// A bundled file (sent along with the file that references it) gets no error entry and
// no images, and is counted as processed; OnFile reports it as "bundled".
func testBundled(t *testing.T, f fixture) {
	id := newUpload(t, f, "app.env", "web.container", "junk")
	var mu sync.Mutex
	outcomes := map[string]int{}
	rec := &recorder{decide: func(_ context.Context, rel string, _ int) error {
		switch rel {
		case "app.env":
			return processor.ErrBundled
		case "junk":
			return processor.ErrUnsupported
		}
		return nil
	}}
	w := processor.New(quiet, f.st, f.tree, rec, processor.Config{PollInterval: 10 * time.Millisecond,
		OnFile: func(kind, outcome string) { mu.Lock(); outcomes[kind+"/"+outcome]++; mu.Unlock() }})
	defer run(t, w)()
	u := waitDone(t, f.st, id)
	if u.FilesProcessed != 3 || u.Errors != 1 || u.Images != 1 {
		t.Fatalf("final %+v", u)
	}
	if errs := errorsOf(t, f.st, id); len(errs) != 1 || errs[0].File != "junk" {
		t.Fatalf("errors = %v", errs)
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string]int{"other/bundled": 1, "quadlet/deployed": 1, "other/unsupported": 1}
	if fmt.Sprint(outcomes) != fmt.Sprint(want) {
		t.Errorf("outcomes = %v, want %v", outcomes, want)
	}
}
