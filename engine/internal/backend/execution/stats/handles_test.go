package stats

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestHandlesReadAgainFromTheStart: a held file is read again from its
// start on every read (a control file regenerates there; here a file
// rewritten in place), Forget closes a cgroup's files, and a cgroup that
// is gone reads as not existing.
func TestHandlesReadAgainFromTheStart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "memory.current")
	write := func(s string) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(s)
		f.Close()
	}
	h := NewHandles()
	write("1\n")
	if data, err := h.files(dir)("memory.current", nil); err != nil || string(data) != "1\n" {
		t.Fatalf("first read: %q %v", data, err)
	}
	// Longer than the first read's buffer: read to the end.
	long := make([]byte, 10000)
	for i := range long {
		long[i] = 'x'
	}
	write(string(long))
	if data, err := h.files(dir)("memory.current", nil); err != nil || len(data) != len(long) {
		t.Fatalf("read after the rewrite: %d bytes, %v", len(data), err)
	}
	// Exactly the first read's size: one more read sees the end.
	write(string(long[:4096]))
	if data, err := h.files(dir)("memory.current", nil); err != nil || len(data) != 4096 {
		t.Fatalf("read of 4096 bytes: %d bytes, %v", len(data), err)
	}
	if h.Held() != 1 {
		t.Fatalf("%d cgroups held, want 1", h.Held())
	}
	h.Forget(dir)
	if h.Held() != 0 {
		t.Fatalf("%d cgroups held after Forget", h.Held())
	}
	os.Remove(path)
	if _, err := h.files(dir)("memory.current", nil); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("read of a removed file: %v", err)
	}
	// A sample through a Reader with Handles reads the same as one without.
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"cgroup.controllers": "cpu io memory pids\n",
		"ctr/cpu.stat":       "usage_usec 2000000\nuser_usec 1500000\nsystem_usec 500000\n",
		"ctr/memory.current": "10485760\n",
		"ctr/memory.stat":    "anon 1\ninactive_file 1048576\n",
		"ctr/memory.max":     "20971520\n",
		"ctr/pids.current":   "3\n",
		"ctr/io.stat":        "8:0 rbytes=4096 wbytes=8192 rios=1 wios=2\n",
	})
	r := Reader{Root: root, Handles: NewHandles()}
	for i := 0; i < 2; i++ {
		held, err := r.Read("ctr", 0)
		if err != nil {
			t.Fatal(err)
		}
		plain, err := Reader{Root: root}.Read("ctr", 0)
		if err != nil {
			t.Fatal(err)
		}
		if held.CPUNano != plain.CPUNano || held.MemUsage != plain.MemUsage || held.MemLimit != plain.MemLimit ||
			held.PIDs != plain.PIDs || held.BlockRead != plain.BlockRead || held.BlockWrite != plain.BlockWrite {
			t.Fatalf("with handles %+v, without %+v", held, plain)
		}
	}
	r.Forget("ctr")
	if r.Handles.Held() != 0 {
		t.Fatal("Reader.Forget left the files open")
	}
	if _, err := r.Read("gone", 0); !errors.Is(err, ErrNoCgroup) {
		t.Fatalf("missing cgroup: %v", err)
	}
}
