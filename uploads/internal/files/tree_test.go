package files

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const testID = "0b6a3f8e-5f2c-4c7e-9a51-1d2f3e4a5b6c"

func newTree(t *testing.T) *Tree {
	t.Helper()
	tr, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Create(testID); err != nil {
		t.Fatal(err)
	}
	return tr
}

// usage is a Guard that keeps the books in memory, like the store does in its rows.
type usage struct {
	mu       sync.Mutex
	bytes    int64
	files    int
	gen      int64
	maxBytes int64
	maxFiles int
	// refuse, when set, is the answer of Locked (the upload is closed).
	refuse error
	// failBooking, when set, makes the booking fail after fn succeeded (the database
	// went away at the commit).
	failBooking error
}

func (u *usage) Limits() Limits { return Limits{MaxBytes: u.maxBytes, MaxFiles: u.maxFiles} }

func (u *usage) Locked(fn func(Usage, int64) (Usage, error)) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.refuse != nil {
		return u.refuse
	}
	next, err := fn(Usage{Bytes: u.bytes, Files: u.files}, u.gen)
	if err != nil {
		return err
	}
	if u.failBooking != nil {
		return u.failBooking
	}
	u.bytes, u.files, u.gen = next.Bytes, next.Files, u.gen+1
	return nil
}

func tmpEntries(t *testing.T, tr *Tree) []os.DirEntry {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(tr.base, testID, tmpDir))
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func TestPutStatOpenDelete(t *testing.T) {
	tr := newTree(t)
	u := &usage{}
	if _, err := tr.Put(testID, "a/b/c.txt", strings.NewReader("hello"), -1, 100, u); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Put(testID, "a/b/c.txt", strings.NewReader("hi"), -1, 100, u); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Put(testID, "a/d", strings.NewReader("xyz"), -1, 100, u); err != nil {
		t.Fatal(err)
	}
	if u.bytes != 5 || u.files != 2 {
		t.Fatalf("usage = %d bytes %d files, want 5, 2", u.bytes, u.files)
	}
	info, err := tr.Stat(testID, "a", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{{Name: "b", Dir: true}, {Name: "d", Size: 3}}
	if !info.Dir || fmt.Sprint(info.Children) != fmt.Sprint(want) || info.NextMarker != "" {
		t.Fatalf("Stat(a) = %+v", info)
	}
	f, fi, err := tr.Open(testID, "a/b/c.txt")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(f)
	f.Close()
	if string(data) != "hi" || fi.Size() != 2 {
		t.Fatalf("content %q", data)
	}
	if _, _, err := tr.Open(testID, "a"); !errors.Is(err, ErrIsDir) {
		t.Fatalf("Open(dir) = %v", err)
	}
	for _, p := range []string{"nope", "a/d/x", "a/b/c.txt/y"} {
		if _, err := tr.Stat(testID, p, "", 10); !errors.Is(err, ErrNotExist) {
			t.Errorf("Stat(%q) = %v, want ErrNotExist", p, err)
		}
	}
	if _, err := tr.Put(testID, "a/d/x", strings.NewReader("x"), -1, 100, u); !errors.Is(err, ErrConflict) {
		t.Fatalf("Put under a file = %v, want ErrConflict", err)
	}
	if _, err := tr.Put(testID, "a/b", strings.NewReader("x"), -1, 100, u); !errors.Is(err, ErrConflict) {
		t.Fatalf("Put over a directory = %v, want ErrConflict", err)
	}
	if _, err := tr.Put(testID, Root, strings.NewReader("x"), -1, 100, u); !errors.Is(err, ErrRootRefused) {
		t.Fatalf("Put root = %v", err)
	}
	if err := tr.Delete(testID, Root, u); !errors.Is(err, ErrRootRefused) {
		t.Fatalf("Delete root = %v", err)
	}
	if err := tr.Delete(testID, "a/b", u); err != nil {
		t.Fatal(err)
	}
	if u.bytes != 3 || u.files != 1 {
		t.Fatalf("usage after delete = %d, %d", u.bytes, u.files)
	}
	if err := tr.Delete(testID, "a/b", u); !errors.Is(err, ErrNotExist) {
		t.Fatalf("second delete = %v", err)
	}
	if len(tmpEntries(t, tr)) != 0 {
		t.Fatal("temporaries left behind")
	}
	if err := tr.Remove(testID); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Stat(testID, Root, "", 1); !errors.Is(err, ErrNotExist) {
		t.Fatalf("Stat after Remove = %v", err)
	}
}

func TestPutLimitsLeaveNothing(t *testing.T) {
	tr := newTree(t)
	u := &usage{maxBytes: 10, maxFiles: 2}
	if _, err := tr.Put(testID, "big", bytes.NewReader(make([]byte, 101)), -1, 100, u); !isLimit(err, "maxFileSize") {
		t.Fatalf("oversized file: %v", err)
	}
	if _, err := tr.Put(testID, "a", strings.NewReader("123456"), -1, 100, u); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Put(testID, "dir/b", strings.NewReader("123456"), -1, 100, u); !isLimit(err, "maxUploadSize") {
		t.Fatalf("over total: %v", err)
	}
	if _, err := tr.Put(testID, "b", strings.NewReader("1"), -1, 100, u); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Put(testID, "c", strings.NewReader("1"), -1, 100, u); !isLimit(err, "maxFiles") {
		t.Fatalf("over count: %v", err)
	}
	// Replacing a file frees its old size first.
	if _, err := tr.Put(testID, "a", strings.NewReader("123456789"), -1, 100, u); err != nil {
		t.Fatalf("replace within limit: %v", err)
	}
	files, _ := tr.Walk(testID)
	if strings.Join(files, ",") != "a,b" || len(tmpEntries(t, tr)) != 0 {
		t.Fatalf("left behind: files %v, tmp %d", files, len(tmpEntries(t, tr)))
	}
	if _, err := tr.Stat(testID, "dir", "", 10); !errors.Is(err, ErrNotExist) {
		t.Fatalf("a refused write left its parent directory: %v", err)
	}
}

func isLimit(err error, limit string) bool {
	var le *LimitError
	return errors.As(err, &le) && le.Limit == limit
}

// A reader that fails midway leaves neither a file nor a temporary.
func TestPutBrokenBody(t *testing.T) {
	tr := newTree(t)
	u := &usage{}
	body := io.MultiReader(strings.NewReader("partial"), errReader{})
	if _, err := tr.Put(testID, "x", body, -1, 100, u); err == nil {
		t.Fatal("want error")
	}
	if files, _ := tr.Walk(testID); len(files) != 0 || len(tmpEntries(t, tr)) != 0 || u.files != 0 {
		t.Fatalf("left behind %v", files)
	}
}

// A body that ends before its announced length is broken, not complete: net/http
// reports it as io.ErrUnexpectedEOF, raw or wrapped by the caller. Nothing is stored,
// whether the body fits in the first buffer or spans several.
func TestPutTruncatedBody(t *testing.T) {
	tr := newTree(t)
	u := &usage{}
	for _, size := range []int{3, copyBuf + 5, 4 * copyBuf} {
		for name, cut := range map[string]error{
			"raw":     io.ErrUnexpectedEOF,
			"wrapped": fmt.Errorf("reading body: %w", io.ErrUnexpectedEOF),
		} {
			for _, hint := range []int64{-1, int64(size) + 1000} {
				body := io.MultiReader(bytes.NewReader(make([]byte, size)), cutReader{cut})
				if _, err := tr.Put(testID, "t", body, hint, 1<<30, u); !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("size %d, %s, hint %d: err = %v, want the truncation", size, name, hint, err)
				}
				if files, _ := tr.Walk(testID); len(files) != 0 || len(tmpEntries(t, tr)) != 0 || u.files != 0 || u.bytes != 0 {
					t.Fatalf("size %d, %s, hint %d: left behind %v", size, name, hint, files)
				}
			}
		}
	}
}

// When the reserver refuses (the upload left the open state while the body streamed),
// a replacing PUT keeps the old content, whatever the size change, and a delete removes
// nothing.
func TestRefusedChangesKeepTheTree(t *testing.T) {
	tr := newTree(t)
	u := &usage{}
	if _, err := tr.Put(testID, "d/f", strings.NewReader("original"), -1, 100, u); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("upload is pending")
	u.refuse = refused
	closed := u
	for _, body := range []string{"same-len", "short", "much longer content"} {
		if _, err := tr.Put(testID, "d/f", strings.NewReader(body), -1, 100, closed); !errors.Is(err, refused) {
			t.Fatalf("replace with %q = %v, want the refusal", body, err)
		}
	}
	for _, p := range []string{"d/f", "d"} {
		if err := tr.Delete(testID, p, closed); !errors.Is(err, refused) {
			t.Fatalf("delete %s = %v, want the refusal", p, err)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(tr.Dir(testID), "d/f")); string(got) != "original" {
		t.Fatalf("content %q after refused changes", got)
	}
	if u.bytes != 8 || u.files != 1 || len(tmpEntries(t, tr)) != 0 {
		t.Fatalf("usage %d bytes %d files, %d temporaries", u.bytes, u.files, len(tmpEntries(t, tr)))
	}
}

// cutReader fails with err at once.
type cutReader struct{ err error }

func (c cutReader) Read([]byte) (int, error) { return 0, c.err }

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

func TestConcurrentWritersNeverMix(t *testing.T) {
	tr := newTree(t)
	u := &usage{}
	const writers = 8
	const size = 1 << 20
	var wg sync.WaitGroup
	var failures atomic.Int32
	for round := 0; round < 3; round++ {
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func(b byte) {
				defer wg.Done()
				if _, err := tr.Put(testID, "same/file", slowReader{bytes.NewReader(bytes.Repeat([]byte{b}, size))}, -1, size, u); err != nil {
					failures.Add(1)
				}
			}(byte('a' + w))
		}
		wg.Wait()
		data, err := os.ReadFile(filepath.Join(tr.Dir(testID), "same/file"))
		if err != nil {
			t.Fatal(err)
		}
		if len(data) != size || bytes.Count(data, data[:1]) != size {
			t.Fatalf("mixed or short file: %d bytes, first %q", len(data), data[0])
		}
	}
	if failures.Load() != 0 || u.files != 1 || u.bytes != size {
		t.Fatalf("failures %d, usage %d files %d bytes", failures.Load(), u.files, u.bytes)
	}
}

// slowReader hands out small chunks so concurrent writers interleave.
type slowReader struct{ r io.Reader }

func (s slowReader) Read(p []byte) (int, error) {
	if len(p) > 4096 {
		p = p[:4096]
	}
	return s.r.Read(p)
}

func TestSymlinksStayInside(t *testing.T) {
	tr := newTree(t)
	u := &usage{}
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := tr.Dir(testID)
	if err := os.Symlink(outside, filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../..", filepath.Join(dir, "up")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"out/secret", "up/etc/passwd"} {
		if _, _, err := tr.Open(testID, p); !errors.Is(err, ErrNotExist) {
			t.Errorf("Open(%q) through a symlink = %v", p, err)
		}
		if _, err := tr.Stat(testID, p, "", 1); !errors.Is(err, ErrNotExist) {
			t.Errorf("Stat(%q) through a symlink = %v", p, err)
		}
		if _, err := tr.Put(testID, p, strings.NewReader("x"), -1, 10, u); err == nil {
			t.Errorf("Put(%q) through a symlink succeeded", p)
		}
		if err := tr.Delete(testID, p, u); err == nil {
			t.Errorf("Delete(%q) through a symlink succeeded", p)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "secret")); err != nil {
		t.Fatal("file outside the tree was touched")
	}
	if es, _ := os.ReadDir(outside); len(es) != 1 {
		t.Fatalf("outside dir changed: %v", es)
	}
	if files, _ := tr.Walk(testID); len(files) != 0 {
		t.Fatalf("Walk followed a link: %v", files)
	}
}

func TestStatPaging(t *testing.T) {
	tr := newTree(t)
	u := &usage{}
	for i := 0; i < 25; i++ {
		if _, err := tr.Put(testID, fmt.Sprintf("d/f%02d", i), strings.NewReader("x"), -1, 10, u); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	marker := ""
	for pages := 0; ; pages++ {
		info, err := tr.Stat(testID, "d", marker, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range info.Children {
			got = append(got, c.Name)
		}
		if info.NextMarker == "" {
			if pages != 2 {
				t.Fatalf("pages = %d", pages+1)
			}
			break
		}
		marker = info.NextMarker
	}
	if len(got) != 25 || got[0] != "f00" || got[24] != "f24" {
		t.Fatalf("paged children = %v", got)
	}
	root, err := tr.Stat(testID, Root, "", 10)
	if err != nil || root.Name != "." || len(root.Children) != 1 {
		t.Fatalf("root = %+v, %v", root, err)
	}
}

// Bodies of every size around the buffer boundaries arrive intact; a body failing after
// several buffers leaves nothing.
func TestPutSizes(t *testing.T) {
	tr := newTree(t)
	u := &usage{}
	for _, size := range []int{0, 1, copyBuf - 1, copyBuf, copyBuf + 1, 3 * copyBuf, 5*copyBuf + 7} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i * 7)
		}
		if _, err := tr.Put(testID, "f", slowReader{bytes.NewReader(data)}, int64(size), int64(size), u); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		got, _ := os.ReadFile(filepath.Join(tr.Dir(testID), "f"))
		if !bytes.Equal(got, data) {
			t.Fatalf("size %d: content differs (%d bytes)", size, len(got))
		}
		if size > 0 {
			if _, err := tr.Put(testID, "g", bytes.NewReader(data), -1, int64(size-1), u); !isLimit(err, "maxFileSize") {
				t.Fatalf("size %d over limit: %v", size, err)
			}
		}
	}
	body := io.MultiReader(bytes.NewReader(make([]byte, 4*copyBuf)), errReader{})
	if _, err := tr.Put(testID, "broken", body, -1, 1<<30, u); err == nil {
		t.Fatal("broken large body accepted")
	}
	if files, _ := tr.Walk(testID); len(files) != 1 || len(tmpEntries(t, tr)) != 0 {
		t.Fatalf("left behind: %v, %d temporaries", files, len(tmpEntries(t, tr)))
	}
}

// A body longer than it announced is still cut at the limit and otherwise kept whole.
func TestPutSizeHintLies(t *testing.T) {
	tr := newTree(t)
	u := &usage{}
	data := bytes.Repeat([]byte("z"), 3*copyBuf)
	if _, err := tr.Put(testID, "f", bytes.NewReader(data), 10, int64(len(data)), u); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(tr.Dir(testID), "f")); !bytes.Equal(got, data) {
		t.Fatalf("got %d bytes", len(got))
	}
	if _, err := tr.Put(testID, "g", bytes.NewReader(data), 10, 100, u); !isLimit(err, "maxFileSize") {
		t.Fatalf("over limit with a small hint: %v", err)
	}
	if _, err := tr.Put(testID, "h", strings.NewReader("abc"), 10, 100, u); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(tr.Dir(testID), "h")); string(got) != "abc" {
		t.Fatalf("short body: %q", got)
	}
}

// TestSweepTemp: a temporary whose writer is gone goes at the next sweep,
// whatever its age (before: only after an hour untouched); one whose writer
// still holds it stays however old, and so does a fresh one.
func TestSweepTemp(t *testing.T) {
	tr := newTree(t)
	tmp := filepath.Join(tr.base, testID, tmpDir)
	gone, killed, held, fresh := filepath.Join(tmp, "put-gone"), filepath.Join(tmp, "put-killed"), filepath.Join(tmp, "put-held"), filepath.Join(tmp, "put-fresh")
	for _, p := range []string{gone, killed, held, fresh} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	lock := func(p string) *os.File {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			t.Fatal(err)
		}
		return f
	}
	// A writer that died: its lock went with it.
	lock(killed).Close()
	writer := lock(held)
	defer writer.Close()
	past := time.Now().Add(-time.Minute)
	for _, p := range []string{gone, killed, held} {
		os.Chtimes(p, past, past)
	}
	if got := tr.TempBytes(testID); got != 4 {
		t.Fatalf("TempBytes = %d, want 4", got)
	}
	n, err := tr.SweepTemp()
	if err != nil || n != 2 {
		t.Fatalf("SweepTemp = %d, %v; want 2", n, err)
	}
	for _, p := range []string{gone, killed} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s kept", filepath.Base(p))
		}
	}
	for _, p := range []string{held, fresh} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed", filepath.Base(p))
		}
	}
}

// TestPutHoldsItsTemporary: while a PUT's body streams, its temporary is
// locked (a sweep leaves it alone) and counted by TempBytes.
func TestPutHoldsItsTemporary(t *testing.T) {
	tr := newTree(t)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := tr.Put(testID, "slow", pr, -1, 1<<20, &usage{})
		done <- err
	}()
	if _, err := pw.Write([]byte("partial")); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(tr.base, testID, tmpDir)
	matches, _ := filepath.Glob(filepath.Join(tmp, "put-*"))
	if len(matches) != 1 {
		t.Fatalf("temporaries %v", matches)
	}
	past := time.Now().Add(-time.Minute)
	os.Chtimes(matches[0], past, past)
	if n, _ := tr.SweepTemp(); n != 0 {
		t.Fatal("swept the temporary of a write in progress")
	}
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := tr.TempBytes(testID); got != 0 {
		t.Fatalf("TempBytes after the write = %d", got)
	}
}

// A change whose booking fails after the tree changed (the process died, or the database
// went away at the commit) leaves its intent; the next change under the lock recounts the
// disk instead of trusting the books, and so does Settle.
func TestFailedBookingIsSettled(t *testing.T) {
	tr := newTree(t)
	u := &usage{maxFiles: 2}
	if _, err := tr.Put(testID, "a", strings.NewReader("12345"), -1, 100, u); err != nil {
		t.Fatal(err)
	}
	lost := errors.New("connection lost at commit")
	u.failBooking = lost
	if _, err := tr.Put(testID, "b", strings.NewReader("123"), -1, 100, u); !errors.Is(err, lost) {
		t.Fatalf("put with a failing booking = %v", err)
	}
	u.failBooking = nil
	if u.bytes != 5 || u.files != 1 {
		t.Fatalf("books %d bytes %d files after the failed booking", u.bytes, u.files)
	}
	in, err := tr.Intents(0)
	if err != nil || len(in) != 1 || in[0].Gen != u.gen+1 {
		t.Fatalf("intents %+v %v, books at generation %d", in, err, u.gen)
	}
	// The disk holds two files: a third one is over maxFiles although the books say 1.
	if _, err := tr.Put(testID, "c", strings.NewReader("1"), -1, 100, u); !isLimit(err, "maxFiles") {
		t.Fatalf("third file = %v, want maxFiles", err)
	}
	if err := tr.Delete(testID, "a", u); err != nil {
		t.Fatal(err)
	}
	if u.bytes != 3 || u.files != 1 {
		t.Fatalf("books %d bytes %d files, want 3 and 1", u.bytes, u.files)
	}
	// A delete whose booking fails, settled by Settle.
	u.failBooking = lost
	if err := tr.Delete(testID, "b", u); !errors.Is(err, lost) {
		t.Fatalf("delete with a failing booking = %v", err)
	}
	u.failBooking = nil
	if err := tr.Settle(testID, u); err != nil {
		t.Fatal(err)
	}
	if in, _ := tr.Intents(0); u.bytes != 0 || u.files != 0 || len(in) != 1 || in[0].Gen > u.gen {
		t.Fatalf("after Settle: books %d bytes %d files at generation %d, intents %+v", u.bytes, u.files, u.gen, in)
	}
	// A refused change leaves the intent as it was.
	u.refuse = errors.New("closed")
	_, _ = tr.Put(testID, "d", strings.NewReader("1"), -1, 100, u)
	if in, _ := tr.Intents(0); len(in) != 1 || in[0].Gen > u.gen {
		t.Fatalf("a refused change left intents %+v (books at %d)", in, u.gen)
	}
}
