package transfertest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/testsupport/tartest"
	"github.com/berth-project/berth/engine/testimage"
)

// TestLoadDockerHubShortNames: with DockerHubShortNames (the Docker API's
// load) a short name in the archive is on Docker Hub, as dockerd names
// it; a name with a registry or under localhost/ stays as it is.
func TestLoadDockerHubShortNames(t *testing.T) {
	e := newEnv(t)
	img := testimage.Busybox("tools:2", "true")
	img.RepoTags = append(img.RepoTags, "team/app:5", "localhost/app:1", "example.com/x:3")
	names, err := e.transfer.Load(context.Background(), bytes.NewReader(archive(t, testimage.Docker, img)), core.LoadOptions{DockerHubShortNames: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"docker.io/library/tools:2", "docker.io/team/app:5", "localhost/app:1", "example.com/x:3"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("names = %v, want %v", names, want)
	}
}

func TestLoadDockerArchiveWithSeveralImages(t *testing.T) {
	e := newEnv(t)
	app := testimage.Busybox("localhost/app:1", "echo", "app")
	app.RepoTags = append(app.RepoTags, "example.com/team/app:stable")
	other := testimage.Busybox("tools:2", "echo", "tools")
	untagged := testimage.Busybox("", "echo", "untagged")
	untagged.RepoTags = nil
	untagged.Config.Labels = map[string]string{"kind": "untagged"}

	names, err := e.transfer.Load(context.Background(), bytes.NewReader(archive(t, testimage.Docker, app, other, untagged)), core.LoadOptions{})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if len(names) != 4 {
		t.Fatalf("names = %v, want 4 (two tags, one short name under localhost/, one ID)", names)
	}
	want := []string{"localhost/app:1", "example.com/team/app:stable", "localhost/tools:2"}
	if !reflect.DeepEqual(names[:3], want) {
		t.Errorf("names = %v, want %v then an ID", names, want)
	}
	first, err := e.store.Lookup(context.Background(), "localhost/app:1")
	if err != nil {
		t.Fatal(err)
	}
	second, err := e.store.Lookup(context.Background(), "example.com/team/app:stable")
	if err != nil {
		t.Fatal(err)
	}
	if first.ID != second.ID {
		t.Errorf("the two tags of one image name different images: %s, %s", first.ID, second.ID)
	}
	if len(names[3]) != len("sha256:")+64 || names[3][:7] != "sha256:" {
		t.Fatalf("untagged image reported as %q, want sha256:<id>", names[3])
	}
	img, err := e.store.Lookup(context.Background(), names[3][7:])
	if err != nil {
		t.Fatalf("untagged image not stored: %v", err)
	}
	if img.Config.Config.Labels["kind"] != "untagged" || len(img.RepoTags) != 0 {
		t.Errorf("untagged image: labels %v tags %v", img.Config.Config.Labels, img.RepoTags)
	}
	checkStore(t, e.store.Storage())
}

func TestLoadOCIArchiveAndCompressedArchives(t *testing.T) {
	e := newEnv(t)
	oci := archive(t, testimage.OCI, testimage.Busybox("localhost/oci:1", "true"), testimage.Busybox("localhost/oci:2", "false"))
	names, err := e.transfer.Load(context.Background(), bytes.NewReader(oci), core.LoadOptions{})
	if err != nil {
		t.Fatalf("load oci-archive: %v", err)
	}
	if !reflect.DeepEqual(names, []string{"localhost/oci:1", "localhost/oci:2"}) {
		t.Errorf("names = %v", names)
	}
	img, err := e.store.Lookup(context.Background(), "localhost/oci:2")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(img.Config.Config.Cmd, []string{"false"}) {
		t.Errorf("cmd = %v", img.Config.Config.Cmd)
	}

	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(archive(t, testimage.Docker, testimage.Busybox("localhost/zipped:1", "true")))
	zw.Close()
	names, err = e.transfer.Load(context.Background(), &gz, core.LoadOptions{})
	if err != nil {
		t.Fatalf("load gzip docker-archive: %v", err)
	}
	if !reflect.DeepEqual(names, []string{"localhost/zipped:1"}) {
		t.Errorf("names = %v", names)
	}

	path := filepath.Join(t.TempDir(), "local.tar")
	if err := testimage.WriteFile(path, testimage.Docker, testimage.Busybox("localhost/local:1", "true")); err != nil {
		t.Fatal(err)
	}
	names, err = e.transfer.LoadFile(context.Background(), path)
	if err != nil || !reflect.DeepEqual(names, []string{"localhost/local:1"}) {
		t.Fatalf("local load: %v %v", names, err)
	}
	if _, err := e.transfer.LoadFile(context.Background(), filepath.Join(t.TempDir(), "missing.tar")); !errors.Is(err, core.ErrNoSuchPath) {
		t.Errorf("missing path: %v, want no such path", err)
	}
	if _, err := e.transfer.LoadFile(context.Background(), "relative.tar"); !errors.Is(err, core.ErrInvalidArgument) {
		t.Errorf("relative path: %v, want invalid argument", err)
	}
	checkStore(t, e.store.Storage())
}

// TestLoadRefusesDamagedArchives: every damaged archive is a 400 and leaves
// the store exactly as it was, including an earlier image whose tag the
// damaged archive would have moved.
func TestLoadRefusesDamagedArchives(t *testing.T) {
	e := newEnv(t)
	e.load(t, "localhost/keep:1")
	good := archive(t, testimage.Docker,
		testimage.Busybox("localhost/first:1", "true"),
		withLayer(testimage.Busybox("localhost/keep:1", "true"), testimage.RandomLayer(3<<20, 7)))
	oci := archive(t, testimage.OCI, withLayer(testimage.Busybox("localhost/keep:1", "true"), testimage.RandomLayer(3<<20, 8)))

	cases := map[string][]byte{
		"empty":             {},
		"garbage":           bytes.Repeat([]byte("not a tar "), 1000),
		"truncated half":    good[:len(good)/2],
		"truncated at end":  good[:len(good)-1536],
		"flipped layer bit": flipInLargestEntry(t, good),
		"oci truncated":     oci[:len(oci)*2/3],
		"oci flipped bit":   flipInLargestEntry(t, oci),
		"gzip garbage":      append([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3}, bytes.Repeat([]byte{0xff}, 100)...),
		"no manifest":       plainTar(t, "hello.txt", "not an image"),
	}
	before := e.snapshot(t)
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			names, err := e.transfer.Load(context.Background(), bytes.NewReader(data), core.LoadOptions{})
			if err == nil {
				t.Fatalf("loaded %v from a damaged archive", names)
			}
			if !errors.Is(err, core.ErrInvalidArgument) {
				t.Errorf("error %v is not an invalid argument (400)", err)
			}
			if after := e.snapshot(t); !reflect.DeepEqual(before, after) {
				t.Errorf("store changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
	checkStore(t, e.store.Storage())
	if _, err := os.Stat(filepath.Join(e.root, "root", "tmp")); err != nil {
		t.Fatal(err)
	}
	leftovers, _ := os.ReadDir(filepath.Join(e.root, "root", "tmp"))
	for _, l := range leftovers {
		t.Errorf("temporary file left behind: %s", l.Name())
	}
}

func withLayer(img testimage.Image, layer testimage.Layer) testimage.Image {
	img.Layers = append(img.Layers, layer)
	return img
}

// flipInLargestEntry returns a copy of a tar archive with one byte changed
// in the middle of its largest member (a layer), which only a digest check
// can notice.
func flipInLargestEntry(t testing.TB, data []byte) []byte {
	t.Helper()
	r := bytes.NewReader(data)
	tr := tar.NewReader(r)
	var bestOffset, bestSize int64
	for {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		if hdr.Size > bestSize {
			bestSize = hdr.Size
			bestOffset = r.Size() - int64(r.Len())
		}
	}
	if bestSize == 0 {
		t.Fatal("archive has no member with content")
	}
	out := bytes.Clone(data)
	out[bestOffset+bestSize/2] ^= 0xff
	return out
}

// plainTar is a valid tar that is no image archive.
func plainTar(t testing.TB, name, content string) []byte {
	t.Helper()
	return tartest.Of(t, name, content)
}
