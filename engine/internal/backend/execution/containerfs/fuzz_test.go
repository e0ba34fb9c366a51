package containerfs

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"path"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/core"
)

// contained reports whether a name from EntryName stays below the
// extraction directory.
func contained(name string) bool {
	return name == "" || (!path.IsAbs(name) && name == path.Clean(name) && name != ".." &&
		!strings.HasPrefix(name, "../") && !strings.Contains(name, "\x00"))
}

// FuzzEntryName: every archive entry name (with any rename) is placed below
// the destination or refused as a bad argument.
func FuzzEntryName(f *testing.F) {
	for _, seed := range [][2]string{
		{"a/b", ""}, {"../x", ""}, {"/etc/passwd", ""}, {"a/../../b", ""}, {"./", ""},
		{"file", "file=../up"}, {"dir/x", "dir=d2"}, {"x", "x=/abs"}, {"..\x00", ""},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, name, rename string) {
		var renames map[string]string
		if from, to, ok := strings.Cut(rename, "="); ok {
			renames = map[string]string{from: to}
		}
		got, err := EntryName(name, renames)
		if err != nil {
			if !errors.Is(err, core.ErrInvalidArgument) {
				t.Fatalf("%q: %v is not a bad argument", name, err)
			}
			return
		}
		if !contained(got) {
			t.Fatalf("%q (rename %q) placed at %q", name, rename, got)
		}
	})
}

// FuzzReceive: any byte stream is either refused as a bad argument or every
// entry it holds has a contained name (and hard link target).
func FuzzReceive(f *testing.F) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "a", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644})
	tw.Write([]byte("x"))
	tw.WriteHeader(&tar.Header{Name: "../b", Typeflag: tar.TypeLink, Linkname: "/a"})
	tw.Close()
	f.Add(buf.Bytes())
	f.Add([]byte("not a tar"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var spool bytes.Buffer
		err := Receive(bytes.NewReader(data), &spool, nil)
		if err != nil {
			if !errors.Is(err, core.ErrInvalidArgument) {
				t.Fatalf("%v is not a bad argument", err)
			}
			return
		}
		tr := tar.NewReader(&spool)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				t.Fatalf("an accepted archive does not read back: %v", err)
			}
			if name, err := EntryName(h.Name, nil); err != nil || !contained(name) {
				t.Fatalf("accepted entry %q: %q %v", h.Name, name, err)
			}
		}
	})
}
