package archivefmt

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/testsupport/tartest"
)

func TestSniffArchive(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		data []byte
		want Format
		bad  bool
	}{
		{"docker", tartest.Of(t, "manifest.json", "[]", "x.tar", "y"), Docker, false},
		{"docker and oci", tartest.Of(t, "index.json", "{}", "manifest.json", "[]"), Docker, false},
		{"oci", tartest.Of(t, "oci-layout", "{}", "./index.json", "{}"), OCI, false},
		{"plain tar", tartest.Of(t, "a.txt", "a"), Unknown, true},
		{"empty", nil, Unknown, true},
		{"not tar", bytes.Repeat([]byte("x"), 2000), Unknown, true},
	}
	for _, c := range cases {
		path := filepath.Join(dir, c.name)
		if err := os.WriteFile(path, c.data, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := Sniff(path)
		if c.bad {
			if !errors.Is(err, core.ErrInvalidArgument) {
				t.Errorf("%s: %v, want invalid argument", c.name, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %v %v, want %v", c.name, got, err, c.want)
		}
	}
}

func TestUntarPlainStaysInside(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"../escape", "/abs/file", "a/../../b"} {
		path := filepath.Join(t.TempDir(), "a.tar")
		os.WriteFile(path, tartest.Of(t, name, "x"), 0o600)
		if err := UnpackLayout(context.Background(), path, dir); !errors.Is(err, core.ErrInvalidArgument) {
			t.Errorf("%q: %v, want invalid argument", name, err)
		}
	}
	path := filepath.Join(t.TempDir(), "link.tar")
	os.WriteFile(path, tartest.Of(t, "link", "-> /etc/passwd"), 0o600)
	if err := UnpackLayout(context.Background(), path, dir); !errors.Is(err, core.ErrInvalidArgument) {
		t.Errorf("symlink entry: %v, want invalid argument", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Errorf("refused archives wrote %d entries", len(entries))
	}
}

// FuzzArchiveParsing: whatever bytes a client uploads, sniffing and unpacking
// either succeed or refuse with a bad-argument error, and nothing is written
// outside the unpack directory.
func FuzzArchiveParsing(f *testing.F) {
	f.Add(tartest.Of(f, "manifest.json", "[]"))
	f.Add(tartest.Of(f, "oci-layout", "{}", "index.json", "{}", "blobs/sha256/ab", "x"))
	f.Add(tartest.Of(f, "../x", "y"))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		base, err := os.MkdirTemp("", "fuzz-archive-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(base)
		path := filepath.Join(base, "in.tar")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Sniff(path); err != nil && !errors.Is(err, core.ErrInvalidArgument) {
			t.Fatalf("sniff: %v", err)
		}
		out := filepath.Join(base, "out")
		if err := os.Mkdir(out, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := UnpackLayout(context.Background(), path, out); err != nil && !errors.Is(err, core.ErrInvalidArgument) {
			t.Fatalf("untar: %v", err)
		}
		entries, _ := os.ReadDir(base)
		for _, e := range entries {
			if e.Name() != "in.tar" && e.Name() != "out" {
				t.Fatalf("unpacking wrote %s outside its directory", e.Name())
			}
		}
	})
}
