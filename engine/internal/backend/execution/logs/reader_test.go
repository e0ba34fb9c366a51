package logs

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var base = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

func record(sec int, stream string, partial bool, text string) []byte {
	return AppendRecord(nil, Line{Time: base.Add(time.Duration(sec) * time.Second), Stream: stream, Partial: partial, Text: []byte(text)})
}

func writeLog(t *testing.T, records ...[]byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ctr.log")
	var all []byte
	for _, r := range records {
		all = append(all, r...)
	}
	if err := os.WriteFile(path, all, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// collect renders lines as "stream:text" with "|" marking partial records.
func collect(t *testing.T, path string, opts Options) []string {
	t.Helper()
	var out []string
	err := Read(context.Background(), path, opts, func(l Line) error {
		s := l.Stream + ":" + string(l.Text)
		if l.Partial {
			s += "|"
		}
		out = append(out, s)
		return nil
	})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return out
}

func TestReadSelection(t *testing.T) {
	path := writeLog(t,
		record(0, Stdout, false, "one"),
		record(1, Stderr, false, "two"),
		[]byte("garbage that is skipped\n"),
		record(2, Stdout, true, "thr"),
		record(2, Stdout, false, "ee"),
		record(3, Stdout, false, "four"),
	)
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"all", Options{Tail: -1}, "stdout:one,stderr:two,stdout:thr|,stdout:ee,stdout:four"},
		{"tail 2 keeps partial with its line", Options{Tail: 2}, "stdout:thr|,stdout:ee,stdout:four"},
		{"tail 0", Options{Tail: 0}, ""},
		{"tail beyond size", Options{Tail: 50}, "stdout:one,stderr:two,stdout:thr|,stdout:ee,stdout:four"},
		{"since", Options{Tail: -1, Since: base.Add(2 * time.Second)}, "stdout:thr|,stdout:ee,stdout:four"},
		{"until", Options{Tail: -1, Until: base.Add(1 * time.Second)}, "stdout:one,stderr:two"},
		{"until with tail", Options{Tail: 1, Until: base.Add(2 * time.Second)}, "stdout:thr|,stdout:ee"},
		{"since and until", Options{Tail: -1, Since: base.Add(time.Second), Until: base.Add(time.Second)}, "stderr:two"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := strings.Join(collect(t, path, tt.opts), ",")
			if got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestReadMissingFile(t *testing.T) {
	got := collect(t, filepath.Join(t.TempDir(), "none.log"), Options{Tail: -1})
	if len(got) != 0 {
		t.Fatalf("missing file gave %v", got)
	}
}

func TestFollow(t *testing.T) {
	path := writeLog(t, record(0, Stdout, false, "first"))
	done := make(chan struct{})
	var mu sync.Mutex
	var got []string
	seen := make(chan struct{}, 16)
	errc := make(chan error, 1)
	go func() {
		errc <- Read(context.Background(), path, Options{Tail: -1, Follow: true, Done: done, PollInterval: time.Hour}, func(l Line) error {
			mu.Lock()
			got = append(got, string(l.Text))
			mu.Unlock()
			seen <- struct{}{}
			return nil
		})
	}()
	wait := func(what string) {
		select {
		case <-seen:
		case <-time.After(5 * time.Second):
			t.Fatalf("no record for %s", what)
		}
	}
	wait("existing line")
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// A record written in two pieces must come out once, whole.
	rec := record(1, Stdout, false, "second")
	if _, err := f.Write(rec[:10]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if _, err := f.Write(rec[10:]); err != nil {
		t.Fatal(err)
	}
	wait("appended line (inotify)")
	if _, err := f.Write(record(2, Stdout, false, "last")); err != nil {
		t.Fatal(err)
	}
	close(done)
	followEnded(t, errc, "follow did not end after done")
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(got, ",") != "first,second,last" {
		t.Fatalf("got %v", got)
	}
}

func TestFollowWaitsForFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "later.log")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got := make(chan string, 1)
	go func() {
		_ = Read(ctx, path, Options{Tail: -1, Follow: true, PollInterval: 20 * time.Millisecond}, func(l Line) error {
			got <- string(l.Text)
			cancel()
			return nil
		})
	}()
	time.Sleep(50 * time.Millisecond)
	if err := os.WriteFile(path, record(0, Stdout, false, "hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if s != "hello" {
			t.Fatalf("got %q", s)
		}
	case <-ctx.Done():
		t.Fatal("no record from a file created after the follow started")
	}
}

func TestFollowContextCancel(t *testing.T) {
	path := writeLog(t, record(0, Stdout, false, "x"))
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		errc <- Read(ctx, path, Options{Tail: -1, Follow: true}, func(Line) error { return nil })
	}()
	time.Sleep(30 * time.Millisecond)
	cancel()
	followEnded(t, errc, "follow ignored cancellation")
}

func TestTailOfLongLog(t *testing.T) {
	var records [][]byte
	for i := 0; i < 20000; i++ {
		records = append(records, record(i, Stdout, false, strings.Repeat("x", 20)+" "+strconv.Itoa(i)))
		if i%1000 == 0 {
			records = append(records, record(i, Stderr, true, "part-"), record(i, Stderr, false, "end "+strconv.Itoa(i)))
		}
	}
	path := writeLog(t, records...)
	got := collect(t, path, Options{Tail: 3})
	want := []string{"stdout:" + strings.Repeat("x", 20) + " 19997", "stdout:" + strings.Repeat("x", 20) + " 19998", "stdout:" + strings.Repeat("x", 20) + " 19999"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("tail 3 of a long log: %v", got)
	}
	// A partial record belongs to the line it starts.
	got = collect(t, path, Options{Tail: 1000})
	if len(got) != 1001 || got[0] != "stderr:part-|" || got[1] != "stderr:end 19000" {
		t.Fatalf("tail 1000: %d records, first %v", len(got), got[:2])
	}
	// The backwards scan must agree with a full read for every size.
	for _, n := range []int{0, 1, 2, 999, 1000, 1001, 25000} {
		all := collect(t, path, Options{Tail: -1})
		fromEnd := collect(t, path, Options{Tail: n})
		var lines int
		var cut int
		for i := len(all) - 1; i >= 0 && lines < n; i-- {
			if !strings.HasSuffix(all[i], "|") {
				lines++
			}
			cut = i
		}
		if n == 0 {
			cut = len(all)
		}
		if i := cut - 1; i >= 0 && strings.HasSuffix(all[i], "|") {
			cut = i
		}
		if strings.Join(fromEnd, "\n") != strings.Join(all[cut:], "\n") {
			t.Fatalf("tail %d: %d records, want %d", n, len(fromEnd), len(all)-cut)
		}
	}
}

func TestTailOffsetSmallFile(t *testing.T) {
	path := writeLog(t, record(0, Stdout, false, "a"), record(1, Stdout, false, "b"))
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	if off, err := tailOffset(f, st.Size(), 5); err != nil || off != 0 {
		t.Fatalf("fewer lines than the tail: offset %d, %v", off, err)
	}
	off, err := tailOffset(f, st.Size(), 1)
	if err != nil || off != int64(len(record(0, Stdout, false, "a"))) {
		t.Fatalf("tail 1 offset %d, %v", off, err)
	}
}

// followEnded waits up to 5 s for a follow's Read to return on errc and
// fails the test if it returned an error, or with what if it did not
// return.
func followEnded(t *testing.T, errc <-chan error, what string) {
	t.Helper()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal(what)
	}
}
