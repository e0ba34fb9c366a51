package build

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/backend/platform/sizelimit"
	"github.com/berth-project/berth/engine/internal/core"
)

// tarOf writes headers (with content for regular files) into a tar stream.
func tarOf(t testing.TB, entries ...tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		h := h
		content := h.Linkname
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(content))
			h.Linkname = ""
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte(content))
		}
	}
	tw.Close()
	return buf.Bytes()
}

func file(name, content string) tar.Header {
	return tar.Header{Name: name, Typeflag: tar.TypeReg, Linkname: content}
}

func TestEntryName(t *testing.T) {
	cases := []struct {
		in, want string
		ok       bool
	}{
		{"a/b", "a/b", true},
		{"./a//b/", "a/b", true},
		{"/abs/path", "abs/path", true},
		{".", ".", true},
		{"../x", "", false},
		{"a/../../x", "", false},
		{"a/..", "", false},
		{"", "", false},
		{"a\x00b", "", false},
	}
	for _, tc := range cases {
		got, err := entryName(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("entryName(%q) = %q, %v; want %q ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
		if err != nil && !errors.Is(err, core.ErrInvalidArgument) {
			t.Errorf("entryName(%q): %v is not an invalid argument", tc.in, err)
		}
	}
}

func TestExtractContextRefusesEscapes(t *testing.T) {
	outside := t.TempDir()
	cases := map[string][]byte{
		"dot-dot":           tarOf(t, file("../escape", "x")),
		"nested dot-dot":    tarOf(t, file("a/../../escape", "x")),
		"hard link outside": tarOf(t, tar.Header{Name: "l", Typeflag: tar.TypeLink, Linkname: "../../../etc/passwd"}),
		"hard link to none": tarOf(t, tar.Header{Name: "l", Typeflag: tar.TypeLink, Linkname: "missing"}),
		"device":            tarOf(t, tar.Header{Name: "dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			err := extractContext(context.Background(), bytes.NewReader(data), dir, sizelimit.New(1<<20, "build context"))
			if !errors.Is(err, core.ErrInvalidArgument) {
				t.Fatalf("got %v, want an invalid argument", err)
			}
		})
	}
	// Writes through a symlink the context planted stay inside the context.
	dir := t.TempDir()
	data := tarOf(t, tar.Header{Name: "d", Typeflag: tar.TypeSymlink, Linkname: outside}, file("d/planted", "x"),
		tar.Header{Name: "up", Typeflag: tar.TypeSymlink, Linkname: "../../../../.."}, file("up/tmp/planted2", "y"))
	if err := extractContext(context.Background(), bytes.NewReader(data), dir, sizelimit.New(1<<20, "build context")); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(outside); len(left) > 0 {
		t.Fatalf("written outside the context: %v", left)
	}
	if _, err := os.Stat("/tmp/planted2"); err == nil {
		t.Fatal("written to /tmp through a symlink")
	}
}

func TestExtractContextBoundsExpandedSize(t *testing.T) {
	data := tarOf(t, file("big", strings.Repeat("x", 4096)))
	err := extractContext(context.Background(), bytes.NewReader(data), t.TempDir(), sizelimit.New(1024, "build context"))
	if !errors.Is(err, core.ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
}

func TestExcluder(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ".dockerignore"), []byte("# comment\n*.log\nbuild/\n!build/keep.txt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ex, err := loadExcluder(diskTree{}, dir, []string{"podman-build-secret1"})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]bool{
		"a.log": true, "src/a.log": false, "build/out": true, "build/keep.txt": false, "main.go": false,
		"podman-build-secret1": true, "tmp/x/podman-build-secret1": true, ".": false,
	}
	for rel, want := range cases {
		if got := ex.excluded(rel); got != want {
			t.Errorf("excluded(%q) = %v, want %v", rel, got, want)
		}
	}
	// .containerignore wins over .dockerignore.
	if err := os.WriteFile(filepath.Join(dir, ".containerignore"), []byte("main.go\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ex, err = loadExcluder(diskTree{}, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !ex.excluded("main.go") || ex.excluded("a.log") {
		t.Fatal(".containerignore was not the file read")
	}
}

func TestExposedPorts(t *testing.T) {
	cases := map[string]string{
		"80": "80/tcp", "53/udp": "53/udp", "8000-8002": "8000/tcp 8001/tcp 8002/tcp", "9/SCTP": "9/sctp",
		"0": "", "70000": "", "80/icmp": "", "x": "", "5-3": "", "08": "",
	}
	for in, want := range cases {
		got, err := exposedPorts(in)
		if want == "" {
			if err == nil {
				t.Errorf("exposedPorts(%q) = %v, want an error", in, got)
			}
			continue
		}
		if err != nil || strings.Join(got, " ") != want {
			t.Errorf("exposedPorts(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
}

func TestParseUlimits(t *testing.T) {
	got, err := parseUlimits([]string{"nofile=100:200", "nproc=50", "core=-1"})
	if err != nil || len(got) != 3 || got[0].Soft != 100 || got[0].Hard != 200 || got[1].Hard != 50 || got[2].Soft != ^uint64(0) {
		t.Fatalf("got %+v, %v", got, err)
	}
	for _, bad := range []string{"nofile", "=1", "bogus=1", "nofile=x", "nofile=1:y"} {
		if _, err := parseUlimits([]string{bad}); !errors.Is(err, core.ErrInvalidArgument) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestCheckLocalDir(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	os.WriteFile(f, nil, 0o644)
	for _, ok := range []string{dir, dir + "/"} {
		if err := checkLocalDir(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "rel", dir + "/../" + filepath.Base(dir), dir + "/./", f} {
		if err := checkLocalDir(bad); !errors.Is(err, core.ErrInvalidArgument) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	// A directory that does not exist is a 404, as Podman's local build.
	if err := checkLocalDir(dir + "/missing"); !errors.Is(err, core.ErrNoSuchPath) {
		t.Errorf("missing: %v, want ErrNoSuchPath", err)
	}
}

// FuzzExtractContext unpacks arbitrary bytes as a context: whatever they
// are, nothing may be written outside the context directory.
func FuzzExtractContext(f *testing.F) {
	f.Add(tarOf(f, file("Containerfile", "FROM scratch\n"), tar.Header{Name: "d", Typeflag: tar.TypeDir, Mode: 0o755}, file("d/a", "a")))
	f.Add(tarOf(f, tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/"}, file("l/x", "x")))
	f.Add(tarOf(f, tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "../x"}))
	f.Fuzz(func(t *testing.T, data []byte) {
		base := t.TempDir()
		dir := filepath.Join(base, "ctx")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		_ = extractContext(context.Background(), bytes.NewReader(data), dir, sizelimit.New(1<<20, "build context"))
		err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if p != base && p != dir && !strings.HasPrefix(p, dir+"/") {
				t.Fatalf("%s was written outside the context", p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzExcluder reads arbitrary ignore files and paths: no panic, and the
// answer for a path is stable.
func FuzzExcluder(f *testing.F) {
	f.Add("*.log\n!keep.log\nbuild/\n", "build/x.log")
	f.Add("**/secret*\n", "a/b/secret.txt")
	f.Add("[\n", "x")
	f.Fuzz(func(t *testing.T, patterns, rel string) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, ".containerignore"), []byte(patterns), 0o644); err != nil {
			t.Fatal(err)
		}
		ex, err := loadExcluder(diskTree{}, dir, nil)
		if err != nil {
			return
		}
		if first := ex.excluded(rel); ex.excluded(rel) != first {
			t.Fatal("unstable answer")
		}
	})
}
