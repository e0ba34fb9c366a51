package containerfs

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
)

// fixture is a fake container: a rootfs with a volume directory beside it,
// and a host directory outside both that nothing may reach.
type fixture struct {
	view    View
	rootfs  string
	volume  string
	outside string
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	testdeadline.Set(t, testdeadline.Default)
	if os.Geteuid() != 0 {
		t.Skip("needs root (extraction sets owners)")
	}
	dir := t.TempDir()
	f := fixture{rootfs: filepath.Join(dir, "rootfs"), volume: filepath.Join(dir, "volume"), outside: filepath.Join(dir, "outside")}
	for _, d := range []string{f.rootfs + "/etc", f.rootfs + "/data", f.rootfs + "/srv", f.volume, f.outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, f.outside+"/secret", "host secret\n")
	write(t, f.rootfs+"/etc/hostname", "ctr\n")
	write(t, f.volume+"/in-volume", "volume data\n")
	// Links a container could plant: absolute and relative ones that point
	// at the host outside the rootfs, and one through the volume.
	must(t, os.Symlink(f.outside+"/secret", f.rootfs+"/etc/shadow-link"))
	must(t, os.Symlink("../../../../../../../../"+strings.TrimPrefix(f.outside, "/"), f.rootfs+"/escape"))
	must(t, os.Symlink(f.outside, f.rootfs+"/srv/abs"))
	f.view = View{Root: f.rootfs, Mounts: []Mount{{Destination: "/data", Source: f.volume}}, WorkDir: "/etc"}
	return f
}

func write(t *testing.T, p, data string) {
	t.Helper()
	must(t, os.WriteFile(p, []byte(data), 0o644))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// tarOf builds an archive from headers; a regular entry's content is its Linkname field's text when Size is set.
func tarOf(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: 0o644, Linkname: e.link, Size: int64(len(e.body))}
		if e.typ == tar.TypeDir {
			h.Mode = 0o755
		}
		must(t, tw.WriteHeader(h))
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	must(t, tw.Close())
	return buf.Bytes()
}

type tarEntry struct {
	name string
	typ  byte
	body string
	link string
}

func reg(name, body string) tarEntry   { return tarEntry{name: name, typ: tar.TypeReg, body: body} }
func dir(name string) tarEntry         { return tarEntry{name: name, typ: tar.TypeDir} }
func symlink(name, to string) tarEntry { return tarEntry{name: name, typ: tar.TypeSymlink, link: to} }
func hardlink(name, to string) tarEntry {
	return tarEntry{name: name, typ: tar.TypeLink, link: to}
}

// put receives and extracts an archive into dir of the view.
func (f fixture) put(t *testing.T, dir string, data []byte, opts PutOptions) error {
	t.Helper()
	spool, err := os.CreateTemp(t.TempDir(), "spool")
	if err != nil {
		t.Fatal(err)
	}
	defer spool.Close()
	if err := Receive(bytes.NewReader(data), spool, opts.Rename); err != nil {
		return err
	}
	return f.view.Extract(dir, spool, opts)
}

// get returns the entries of the archive of p, with file contents.
func (f fixture) get(t *testing.T, p string) (map[string]string, error) {
	t.Helper()
	return f.getWith(t, p, f.view.WriteArchive)
}

// getWith is get with the archive written by write.
func (f fixture) getWith(t *testing.T, p string, write func(string, io.Writer) error) (map[string]string, error) {
	t.Helper()
	var buf bytes.Buffer
	if err := write(p, &buf); err != nil {
		return nil, err
	}
	out := map[string]string{}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		switch h.Typeflag {
		case tar.TypeSymlink:
			out[h.Name] = "-> " + h.Linkname
		case tar.TypeLink:
			out[h.Name] = "=> " + h.Linkname
		default:
			out[h.Name] = string(data)
		}
	}
}

// tree lists every path under dir with file contents.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "-> " + target
		case fi.Mode().IsRegular():
			data, _ := os.ReadFile(p)
			out[rel] = string(data)
		default:
			out[rel] = fi.Mode().Type().String()
		}
		return nil
	})
	return out
}

func TestStatResolvesInsideTheContainer(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		path, target string
		dir          bool
		missing      bool
	}{
		{path: "/etc/hostname", target: "/etc/hostname"},
		{path: "hostname", target: "/etc/hostname"}, // relative to the working directory
		{path: "/", target: "/.", dir: true},
		{path: "/etc/", target: "/etc/", dir: true},
		{path: "/etc/.", target: "/etc/.", dir: true},
		{path: "/../../../etc/hostname", target: "/etc/hostname"},
		{path: "../../../../../etc/hostname", target: "/etc/hostname"},
		{path: "/data/in-volume", target: "/data/in-volume"},
		// Links that aim at the host resolve inside the rootfs, where nothing is.
		{path: "/etc/shadow-link", missing: true},
		{path: "/escape/secret", missing: true},
		{path: "/srv/abs/secret", missing: true},
		{path: "/nonexistent", missing: true},
	} {
		st, err := f.view.Stat(tc.path)
		if tc.missing {
			if !errors.Is(err, core.ErrNoSuchPath) {
				t.Errorf("%s: %+v %v, want no such path", tc.path, st, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.path, err)
			continue
		}
		if st.LinkTarget != tc.target || st.IsDir != tc.dir {
			t.Errorf("%s: %+v, want target %s dir %v", tc.path, st, tc.target, tc.dir)
		}
	}
	// The same link, once the rootfs has a file where it points, shows the
	// container's file.
	must(t, os.MkdirAll(f.rootfs+f.outside, 0o755))
	write(t, f.rootfs+f.outside+"/secret", "container file\n")
	st, err := f.view.Stat("/etc/shadow-link")
	if err != nil || st.LinkTarget != f.outside+"/secret" || st.Size != int64(len("container file\n")) {
		t.Errorf("link into the rootfs: %+v %v", st, err)
	}
	got, err := f.get(t, "/etc/shadow-link")
	if err != nil || !reflect.DeepEqual(got, map[string]string{"secret": "container file\n"}) {
		t.Errorf("archive of the link: %v %v", got, err)
	}
}

func TestArchiveOfADirectoryKeepsLinksAsLinks(t *testing.T) {
	f := newFixture(t)
	must(t, os.MkdirAll(f.rootfs+"/app/sub", 0o755))
	write(t, f.rootfs+"/app/a", "A")
	must(t, os.Link(f.rootfs+"/app/a", f.rootfs+"/app/sub/b"))
	must(t, os.Symlink("/etc/shadow-link", f.rootfs+"/app/l"))
	got, err := f.get(t, "/app")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"app/": "", "app/a": "A", "app/l": "-> /etc/shadow-link", "app/sub/": "", "app/sub/b": "=> app/a"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("archive of /app: %v, want %v", got, want)
	}
	got, err = f.get(t, "/app/.")
	if err != nil || got["a"] != "A" || got["sub/b"] != "=> a" {
		t.Errorf("archive of /app/.: %v %v", got, err)
	}
	// The escaping links themselves are archived as links, never followed.
	got, err = f.get(t, "/")
	if err != nil || got["escape"] == "" || !strings.HasPrefix(got["escape"], "-> ") || got["etc/hostname"] != "ctr\n" {
		t.Errorf("archive of /: %v %v", got, err)
	}
	if _, err := f.get(t, "/srv/abs/secret"); !errors.Is(err, core.ErrNoSuchPath) {
		t.Errorf("archive through a link to the host: %v", err)
	}
}

func TestExtractStaysInside(t *testing.T) {
	f := newFixture(t)
	outsideBefore := tree(t, f.outside)
	for name, tc := range map[string]struct {
		archive []byte
		wantErr bool
		check   func(t *testing.T)
	}{
		"dot-dot entry":     {archive: tarOf(t, reg("ok", "x"), reg("../../../../outside/evil", "x")), wantErr: true},
		"dot-dot hard link": {archive: tarOf(t, hardlink("h", "../../outside/secret")), wantErr: true},
		"absolute entry": {archive: tarOf(t, reg("/abs-entry", "kept inside")), check: func(t *testing.T) {
			if data, err := os.ReadFile(f.rootfs + "/srv/abs-entry"); err != nil || string(data) != "kept inside" {
				t.Errorf("absolute entry: %q %v", data, err)
			}
		}},
		"hard link to a host path": {archive: tarOf(t, hardlink("h", f.outside+"/secret")), wantErr: true},
		// A link the archive makes is never a way out: writing through it is refused.
		"symlink then write through it": {archive: tarOf(t, symlink("through", f.outside), reg("through/evil", "x")), wantErr: true},
		"existing link is replaced, not written through": {archive: tarOf(t, reg("abs", "replaced")), check: func(t *testing.T) {
			fi, err := os.Lstat(f.rootfs + "/srv/abs")
			if err != nil || !fi.Mode().IsRegular() {
				t.Errorf("/srv/abs: %v %v", fi, err)
			}
		}},
		"relative escape link then write": {archive: tarOf(t, symlink("up", "../../../../../../.."), reg("up/evil2", "x")), wantErr: true},
		// /srv/abs is a link to the host directory: inside the container it
		// dangles, so writing below it is refused.
		"through an existing link to the host": {archive: tarOf(t, reg("abs/evil3", "x")), wantErr: true},
		"truncated":                            {archive: tarOf(t, reg("first", "written?"), reg("second", strings.Repeat("y", 4000)))[:2000], wantErr: true},
		"not a tar":                            {archive: bytes.Repeat([]byte("garbage "), 300), wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			before := tree(t, f.rootfs)
			err := f.put(t, "/srv", tc.archive, PutOptions{})
			if tc.wantErr {
				if !errors.Is(err, core.ErrInvalidArgument) {
					t.Fatalf("err %v, want a bad argument", err)
				}
				if after := tree(t, f.rootfs); !reflect.DeepEqual(before, after) {
					t.Errorf("a refused archive changed the rootfs:\n%v\n%v", before, after)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if tc.check != nil {
				tc.check(t)
			}
		})
	}
	if after := tree(t, f.outside); !reflect.DeepEqual(outsideBefore, after) {
		t.Errorf("the host directory changed: %v -> %v", outsideBefore, after)
	}
}

func TestExtractOptions(t *testing.T) {
	f := newFixture(t)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(tarOf(t, dir("d/"), reg("d/f", "in d"), reg("file", "renamed")))
	zw.Close()
	if err := f.put(t, "/data", gz.Bytes(), PutOptions{Rename: map[string]string{"file": "new-name"}, Owner: &Owner{UID: 1234, GID: 5678}}); err != nil {
		t.Fatal(err)
	}
	// Below a volume's destination the files land in the volume.
	got := tree(t, f.volume)
	if got["d/f"] != "in d" || got["new-name"] != "renamed" || got["file"] != "" {
		t.Errorf("volume after extraction: %v", got)
	}
	var uids []int
	for _, p := range []string{f.volume + "/d/f", f.volume + "/d"} {
		fi, _ := os.Stat(p)
		uids = append(uids, int(statOwner(fi)))
	}
	sort.Ints(uids)
	if uids[0] != 1234 || uids[1] != 1234 {
		t.Errorf("owners %v, want 1234", uids)
	}

	// NoOverwriteDirNonDir refuses a file over a directory before writing anything.
	before := tree(t, f.rootfs)
	err := f.put(t, "/", tarOf(t, reg("new-first", "x"), reg("etc", "a file")), PutOptions{NoOverwriteDirNonDir: true})
	if !errors.Is(err, core.ErrInvalidArgument) {
		t.Errorf("file over directory: %v", err)
	}
	if after := tree(t, f.rootfs); !reflect.DeepEqual(before, after) {
		t.Errorf("a refused extraction changed the rootfs")
	}
	// Without it the directory is replaced.
	if err := f.put(t, "/", tarOf(t, reg("srv", "now a file")), PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(f.rootfs + "/srv"); string(data) != "now a file" {
		t.Errorf("/srv: %q", data)
	}
	// A read-only mount (or root filesystem) is not written.
	ro := f
	ro.view.Mounts = []Mount{{Destination: "/data", Source: f.volume, ReadOnly: true}}
	if err := ro.put(t, "/data", tarOf(t, reg("x", "y")), PutOptions{}); !errors.Is(err, core.ErrStateConflict) {
		t.Errorf("read-only mount: %v", err)
	}
	ro.view.ReadOnly = true
	if err := ro.put(t, "/etc", tarOf(t, reg("x", "y")), PutOptions{}); !errors.Is(err, core.ErrStateConflict) {
		t.Errorf("read-only root: %v", err)
	}
	// The destination must be a directory.
	if err := f.put(t, "/etc/hostname", tarOf(t, reg("x", "y")), PutOptions{}); !errors.Is(err, core.ErrInvalidArgument) {
		t.Errorf("file destination: %v", err)
	}
	if err := f.put(t, "/nonexistent", tarOf(t, reg("x", "y")), PutOptions{}); !errors.Is(err, core.ErrNoSuchPath) {
		t.Errorf("missing destination: %v", err)
	}
}

// TestExtractLegacyRegularFile: an old archive's regular file (typeflag
// NUL, tar.TypeRegA, which tar.Reader hands over as TypeReg) is extracted.
func TestExtractLegacyRegularFile(t *testing.T) {
	f := newFixture(t)
	data := tarOf(t, reg("legacy", "from an old tar"))
	hdr := data[:512]
	hdr[156] = 0 // typeflag: TypeRegA
	copy(hdr[148:156], "        ")
	sum := 0
	for _, b := range hdr {
		sum += int(b)
	}
	copy(hdr[148:156], fmt.Sprintf("%06o\x00 ", sum))
	if err := f.put(t, "/data", data, PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, f.volume)["legacy"]; got != "from an old tar" {
		t.Errorf("legacy entry: %q", got)
	}
}

func TestEntryName(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		rename   map[string]string
		bad      bool
	}{
		{in: "a/b", want: "a/b"},
		{in: "./a/./b/", want: "a/b"},
		{in: "/etc/passwd", want: "etc/passwd"},
		{in: "a/../b", want: "b"},
		{in: ".", want: ""},
		{in: "./", want: ""},
		{in: "..", bad: true},
		{in: "../x", bad: true},
		{in: "a/../../x", bad: true},
		{in: "/../x", bad: true},
		{in: "nul\x00", bad: true},
		{in: "file", rename: map[string]string{"file": "other"}, want: "other"},
		{in: "dir/x", rename: map[string]string{"dir": "d2"}, want: "d2/x"},
		{in: "dirx", rename: map[string]string{"dir": "d2"}, want: "dirx"},
		{in: "file", rename: map[string]string{"file": "../up"}, bad: true},
	} {
		got, err := EntryName(tc.in, tc.rename)
		if tc.bad {
			if !errors.Is(err, core.ErrInvalidArgument) {
				t.Errorf("%q: %q %v, want refused", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %q %v, want %q", tc.in, got, err, tc.want)
		}
	}
}

func statOwner(fi os.FileInfo) uint32 {
	if fi == nil {
		return 0
	}
	return fi.Sys().(*syscall.Stat_t).Uid
}

// TestDockerRules: docker cp's rules (DockerStat, WriteDockerArchive): a
// last component that is a link is the link unless the path ends in "/"
// or "/."; entries are named as asked; "DIR/." is "./NAME" under "./";
// Podman's rules stay as they were for the same paths.
func TestDockerRules(t *testing.T) {
	f := newFixture(t)
	must(t, os.MkdirAll(f.rootfs+"/www/sub", 0o755))
	write(t, f.rootfs+"/www/a", "A\n")
	write(t, f.rootfs+"/www/sub/b", "B\n")
	must(t, os.Symlink("/www/a", f.rootfs+"/www/link"))
	must(t, os.Symlink("sub", f.rootfs+"/www/dlink"))
	must(t, os.Symlink(f.outside+"/secret", f.rootfs+"/www/out"))
	for _, tc := range []struct {
		path string
		want map[string]string
	}{
		{"/www/link", map[string]string{"link": "-> /www/a"}},
		{"/www/dlink", map[string]string{"dlink": "-> sub"}},
		{"/www/out", map[string]string{"out": "-> " + f.outside + "/secret"}},
		{"/www/dlink/", map[string]string{"dlink/": "", "dlink/b": "B\n"}},
		{"/www/dlink/.", map[string]string{"./": "", "./b": "B\n"}},
		{"/www/sub", map[string]string{"sub/": "", "sub/b": "B\n"}},
		{"/www/a", map[string]string{"a": "A\n"}},
		{"/www/.", map[string]string{"./": "", "./a": "A\n", "./dlink": "-> sub", "./link": "-> /www/a", "./out": "-> " + f.outside + "/secret", "./sub/": "", "./sub/b": "B\n"}},
		{"/data", map[string]string{"data/": "", "data/in-volume": "volume data\n"}},
	} {
		got, err := f.getWith(t, tc.path, f.view.WriteDockerArchive)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("docker archive of %s: %v %v, want %v", tc.path, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		path, name, target string
		link, dir          bool
	}{
		{path: "/www/link", name: "link", target: "/www/a", link: true},
		{path: "/www/dlink", name: "dlink", target: "/www/sub", link: true},
		{path: "/www/out", name: "out", target: f.outside + "/secret", link: true},
		{path: "/www/dlink/", name: "dlink", dir: true},
		{path: "/www/.", name: ".", dir: true},
		{path: "/www/a", name: "a"},
		{path: "/data", name: "data", dir: true},
	} {
		st, err := f.view.DockerStat(tc.path)
		if err != nil || st.Name != tc.name || st.LinkTarget != tc.target || (st.Mode&os.ModeSymlink != 0) != tc.link || st.IsDir != tc.dir {
			t.Errorf("docker stat of %s: %+v %v, want name %s target %q link %v dir %v", tc.path, st, err, tc.name, tc.target, tc.link, tc.dir)
		}
	}
	for _, p := range []string{"/www/nosuch", "/nosuch/x", "/www/a/x"} {
		if st, err := f.view.DockerStat(p); !errors.Is(err, core.ErrNoSuchPath) {
			t.Errorf("docker stat of %s: %+v %v, want no such path", p, st, err)
		}
	}
	// Podman's rules for the same link: followed.
	if st, err := f.view.Stat("/www/link"); err != nil || st.LinkTarget != "/www/a" || st.Mode&os.ModeSymlink != 0 || st.Name != "a" {
		t.Errorf("podman stat of the link: %+v %v", st, err)
	}
	if got, err := f.get(t, "/www/link"); err != nil || !reflect.DeepEqual(got, map[string]string{"a": "A\n"}) {
		t.Errorf("podman archive of the link: %v %v", got, err)
	}
}
