package build

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/backend/platform/sizelimit"
	"github.com/berth-project/berth/engine/internal/core"
)

// receive indexes data as a build context rooted at a new directory.
func receive(t testing.TB, data []byte, max int64) (*buildContext, error) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ctx")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return receiveContext(context.Background(), bytes.NewReader(data), dir, t.TempDir(), sizelimit.New(max, "build context"), newPhases())
}

func TestReceiveContextRefusesWhatExtractionRefuses(t *testing.T) {
	cases := map[string]struct {
		data []byte
		want error
	}{
		"dot-dot":           {tarOf(t, file("../escape", "x")), core.ErrInvalidArgument},
		"hard link outside": {tarOf(t, tar.Header{Name: "l", Typeflag: tar.TypeLink, Linkname: "../../../etc/passwd"}), core.ErrInvalidArgument},
		"hard link to none": {tarOf(t, tar.Header{Name: "l", Typeflag: tar.TypeLink, Linkname: "missing"}), core.ErrInvalidArgument},
		"device":            {tarOf(t, tar.Header{Name: "dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}), core.ErrInvalidArgument},
		"file as a parent":  {tarOf(t, file("f", "x"), file("f/y", "y")), core.ErrInvalidArgument},
		"too large":         {tarOf(t, file("big", strings.Repeat("x", 4096))), core.ErrTooLarge},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			max := int64(1 << 20)
			if tc.want == core.ErrTooLarge {
				max = 1024
			}
			if _, err := receive(t, tc.data, max); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// TestReceiveContextIndexesWithoutExtracting checks that a received
// context answers lookups (through a symlink, a replaced entry, a hard
// link) from its index, with nothing on disk until it is materialized.
func TestReceiveContextIndexesWithoutExtracting(t *testing.T) {
	data := tarOf(t,
		file("Containerfile", "FROM scratch\n"),
		tar.Header{Name: "d", Typeflag: tar.TypeDir, Mode: 0o750},
		file("d/a", "first"),
		file("d/a", "second"),
		tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "d"},
		file("l/b", "through the link"),
		tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "d/a"},
		file("big", strings.Repeat("z", keepLimit+1)),
	)
	bc, err := receive(t, data, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer bc.close()
	if left, _ := os.ReadDir(bc.dir); len(left) > 0 {
		t.Fatalf("receiving wrote %v", left)
	}
	idx := bc.index
	if sum, ok := idx.sum(filepath.Join(bc.dir, "d/b")); !ok || sum != sha256.Sum256([]byte("through the link")) {
		t.Fatal("d/b, written through the link l, is not indexed under d")
	}
	if sum, _ := idx.sum(filepath.Join(bc.dir, "h")); sum != sha256.Sum256([]byte("second")) {
		t.Fatal("the hard link does not have the replaced file's content")
	}
	if fi, err := idx.Lstat(filepath.Join(bc.dir, "d")); err != nil || fi.Mode() != fs.ModeDir|0o750 {
		t.Fatalf("d: %v %v", fi, err)
	}
	if text, err := idx.readFile(filepath.Join(bc.dir, "Containerfile")); err != nil || string(text) != "FROM scratch\n" {
		t.Fatalf("Containerfile: %q %v", text, err)
	}
	if bc.extracted {
		t.Fatal("a small file's read extracted the context")
	}
	// A large file is read from the extracted context.
	if text, err := idx.readFile(filepath.Join(bc.dir, "big")); err != nil || len(text) != keepLimit+1 || !bc.extracted {
		t.Fatalf("big: %d bytes, %v, extracted %v", len(text), err, bc.extracted)
	}
	if got := treeListing(t, diskTree{}, bc.dir); got != treeListing(t, idx, bc.dir) {
		t.Fatalf("the index and the extraction differ:\nindex:\n%s\ndisk:\n%s", treeListing(t, idx, bc.dir), got)
	}
}

// treeListing lists a tree: path, type, link target and file checksum.
func treeListing(t testing.TB, tr tree, root string) string {
	t.Helper()
	var lines []string
	err := tr.walkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		line := rel + " " + d.Type().String()
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			link, err := tr.Readlink(p)
			if err != nil {
				return err
			}
			line += " -> " + link
		case d.Type().IsRegular():
			sum, err := fileSum(diskTree{}, p)
			if s, ok := tr.sum(p); ok {
				sum, err = s, nil
			}
			if err != nil {
				return err
			}
			line += " " + string(sum[:4])
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// FuzzReceiveContext indexes arbitrary bytes as a context and extracts
// them: the index must refuse what extraction refuses and otherwise
// describe exactly the files extraction writes (so cache keys computed
// from it name the content a step copies), and nothing may be written
// outside the context directory.
func FuzzReceiveContext(f *testing.F) {
	f.Add(tarOf(f, file("Containerfile", "FROM scratch\n"), tar.Header{Name: "d", Typeflag: tar.TypeDir, Mode: 0o755}, file("d/a", "a")))
	f.Add(tarOf(f, tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/"}, file("l/x", "x")))
	f.Add(tarOf(f, tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "sub/.."}, file("l/x", "x"), tar.Header{Name: "sub", Typeflag: tar.TypeDir}))
	f.Add(tarOf(f, file("a", "1"), tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "a"}, file("a", "2"), tar.Header{Name: "a", Typeflag: tar.TypeDir}))
	f.Fuzz(func(t *testing.T, data []byte) {
		base := t.TempDir()
		dir := filepath.Join(base, "ctx")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		bc, rerr := receiveContext(context.Background(), bytes.NewReader(data), dir, t.TempDir(), sizelimit.New(1<<20, "build context"), newPhases())
		check := filepath.Join(base, "check")
		if err := os.Mkdir(check, 0o700); err != nil {
			t.Fatal(err)
		}
		xerr := extractContext(context.Background(), bytes.NewReader(data), check, sizelimit.New(1<<20, "build context"))
		if (rerr == nil) != (xerr == nil) {
			t.Fatalf("receiving: %v; extracting: %v", rerr, xerr)
		}
		if rerr != nil {
			return
		}
		defer bc.close()
		if err := bc.materialize(context.Background()); err != nil {
			t.Fatalf("materializing what was received: %v", err)
		}
		if index, disk := treeListing(t, bc.index, dir), treeListing(t, diskTree{}, dir); index != disk {
			t.Fatalf("index:\n%s\ndisk:\n%s", index, disk)
		}
		err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			for _, root := range []string{dir, check} {
				if p == root || strings.HasPrefix(p, root+"/") {
					return nil
				}
			}
			if p != base {
				t.Fatalf("%s was written outside the context", p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// BenchmarkReceiveContext indexes and spools a 20 MiB context (what a
// build answered from the cache does with it); BenchmarkExtractContext
// writes it to disk (what every build did before).
func BenchmarkReceiveContext(b *testing.B) {
	data := tarOf(b, file("Containerfile", "FROM scratch\n"), file("big", strings.Repeat("0123456789abcdef", 20<<16)))
	b.SetBytes(int64(len(data)))
	for i := 0; i < b.N; i++ {
		bc, err := receive(b, data, 1<<30)
		if err != nil {
			b.Fatal(err)
		}
		bc.close()
	}
}

func BenchmarkExtractContext(b *testing.B) {
	data := tarOf(b, file("Containerfile", "FROM scratch\n"), file("big", strings.Repeat("0123456789abcdef", 20<<16)))
	b.SetBytes(int64(len(data)))
	for i := 0; i < b.N; i++ {
		dir := filepath.Join(b.TempDir(), "ctx")
		if err := os.Mkdir(dir, 0o700); err != nil {
			b.Fatal(err)
		}
		if err := extractContext(context.Background(), bytes.NewReader(data), dir, sizelimit.New(1<<30, "build context")); err != nil {
			b.Fatal(err)
		}
		os.RemoveAll(dir)
	}
}
