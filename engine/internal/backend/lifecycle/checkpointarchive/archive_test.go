package checkpointarchive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/backend/platform/sizelimit"
	"github.com/berth-project/berth/engine/internal/core"
)

// sample writes an archive of a fake checkpoint: two images, a layer diff
// and one of two volumes.
func sample(t testing.TB) []byte {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "inventory.img"), []byte("inv"), 0o600)
	os.WriteFile(filepath.Join(dir, "pages-1.img"), bytes.Repeat([]byte{7}, 5000), 0o600)
	var buf bytes.Buffer
	err := Write(&buf, Contents{
		Config: Config{ID: "abc", Name: "c", Image: "busybox", Spec: core.ContainerSpec{Name: "c", Image: "busybox"},
			Volumes: []Volume{{Name: "v", Dest: "/data", Included: true}, {Name: "w", Dest: "/w"}}},
		CheckpointDir: dir,
		RootfsDiff:    func(w io.Writer) error { _, err := w.Write([]byte("diff")); return err },
		Volume:        func(i int, w io.Writer) error { _, err := w.Write([]byte("vol")); return err },
	})
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	data := sample(t)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(data)
	zw.Close()
	for name, in := range map[string][]byte{"plain": data, "gzip": gz.Bytes()} {
		dir := t.TempDir()
		a, err := Read(context.Background(), bytes.NewReader(in), dir, sizelimit.New(1<<20, "archive"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if a.Config.Name != "c" || a.Config.Spec.Image != "busybox" || !a.Config.HasRootfsDiff {
			t.Fatalf("%s: config %+v", name, a.Config)
		}
		if got, _ := os.ReadFile(a.RootfsDiffPath()); string(got) != "diff" {
			t.Errorf("%s: diff %q", name, got)
		}
		if got, _ := os.ReadFile(a.VolumePath(0)); string(got) != "vol" {
			t.Errorf("%s: volume %q", name, got)
		}
		if a.VolumePath(1) != "" {
			t.Errorf("%s: volume 1 was not included", name)
		}
		if got, _ := os.ReadFile(filepath.Join(a.CheckpointPath(), "pages-1.img")); len(got) != 5000 {
			t.Errorf("%s: pages %d bytes", name, len(got))
		}
	}
	if _, err := Read(context.Background(), bytes.NewReader(data), t.TempDir(), sizelimit.New(1000, "archive")); !errors.Is(err, core.ErrTooLarge) {
		t.Fatalf("over the budget: %v", err)
	}
}

// entries builds a tar of (name, type, content) entries.
func entries(t testing.TB, list ...[3]string) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range list {
		h := &tar.Header{Name: e[0], Typeflag: e[1][0], Mode: 0o600, Size: int64(len(e[2]))}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
			h.Linkname = e[2]
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte(e[2]))
		}
	}
	tw.Close()
	return buf.Bytes()
}

func TestReadRefuses(t *testing.T) {
	good := sample(t)
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "no config.dump"},
		{"text", []byte(strings.Repeat("not a tar ", 100)), "not a checkpoint archive"},
		{"dotdot", entries(t, [3]string{"../x", "0", "a"}), `"../x" escapes`},
		{"absolute", entries(t, [3]string{"/etc/passwd", "0", "a"}), `"/etc/passwd" escapes`},
		{"nested dotdot", entries(t, [3]string{"checkpoint/../../x", "0", "a"}), `"checkpoint/../../x" escapes`},
		{"symlink", entries(t, [3]string{"checkpoint/inventory.img", "2", "/etc/shadow"}), `"checkpoint/inventory.img" is not a regular file`},
		{"hardlink", entries(t, [3]string{"config.dump", "1", "/etc/shadow"}), `"config.dump" is not a regular file`},
		{"deep", entries(t, [3]string{"checkpoint/a/b", "0", "a"}), `"checkpoint/a/b" is not part`},
		{"stranger", entries(t, [3]string{"README", "0", "a"}), `"README" is not part`},
		{"volume name", entries(t, [3]string{"volumes/x.tar", "0", "a"}), `"volumes/x.tar" is not part`},
		{"twice", entries(t, [3]string{"config.dump", "0", "{}"}, [3]string{"./config.dump", "0", "{}"}), "appears twice"},
		{"no images", entries(t, [3]string{"config.dump", "0", `{"Version":1}`}), "no checkpoint/inventory.img"},
		{"version", entries(t, [3]string{"config.dump", "0", `{"Version":9}`}), "version 9"},
		{"unlisted volume", entries(t, [3]string{"config.dump", "0", `{"Version":1}`}, [3]string{"checkpoint/inventory.img", "0", "x"}, [3]string{"volumes/3.tar", "0", "x"}), `"volumes/3.tar" is a volume`},
		{"truncated", good[:len(good)-2000], "corrupt"},
	} {
		_, err := Read(context.Background(), bytes.NewReader(c.data), t.TempDir(), sizelimit.New(1<<20, "archive"))
		if !errors.Is(err, core.ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an invalid argument naming %q", c.name, err, c.want)
		}
	}
}

// FuzzRead feeds Read arbitrary archives: it must answer an invalid
// argument or too large for anything it refuses, never panic, and never
// write outside its directory (nor anything but plain files and
// directories). The seeds (testdata/fuzz/FuzzRead) are a valid archive and
// the refused shapes of TestReadRefuses.
func FuzzRead(f *testing.F) {
	f.Add(sample(f))
	f.Add(entries(f, [3]string{"../x", "0", "a"}))
	f.Add(entries(f, [3]string{"checkpoint/inventory.img", "2", "/etc/shadow"}))
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		dir := filepath.Join(parent, "in")
		os.Mkdir(dir, 0o700)
		a, err := Read(context.Background(), bytes.NewReader(data), dir, sizelimit.New(1<<20, "archive"))
		if err != nil && !errors.Is(err, core.ErrInvalidArgument) && !errors.Is(err, core.ErrTooLarge) {
			t.Fatalf("unclassified error: %v", err)
		}
		if err == nil && a.Config.Version != Version {
			t.Fatalf("accepted version %d", a.Config.Version)
		}
		filepath.WalkDir(parent, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if p != parent && p != dir && !strings.HasPrefix(p, dir+string(filepath.Separator)) {
				t.Fatalf("wrote %s outside %s", p, dir)
			}
			if !d.IsDir() && !d.Type().IsRegular() {
				t.Fatalf("wrote %s of type %v", p, d.Type())
			}
			return nil
		})
	})
}
