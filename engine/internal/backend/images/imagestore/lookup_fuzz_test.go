package imagestore

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/containers/image/v5/copy"
	"github.com/containers/image/v5/docker/archive"
	"github.com/containers/image/v5/signature"
	storagetransport "github.com/containers/image/v5/storage"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/testimage"
)

// storeWithImages opens a vfs store and copies test images into it with
// containers/image directly (no engine transfer code involved).
func storeWithImages(tb testing.TB, images ...testimage.Image) *Store {
	tb.Helper()
	dir := tb.TempDir()
	s, err := Open(Options{Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, "run"), Driver: "vfs"})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Shutdown() })
	policy, err := signature.NewPolicyContext(&signature.Policy{Default: signature.PolicyRequirements{signature.NewPRInsecureAcceptAnything()}})
	if err != nil {
		tb.Fatal(err)
	}
	defer policy.Destroy()
	for _, img := range images {
		path := filepath.Join(dir, "image.tar")
		if err := testimage.WriteFile(path, testimage.Docker, img); err != nil {
			tb.Fatal(err)
		}
		src, err := archive.ParseReference(path)
		if err != nil {
			tb.Fatal(err)
		}
		dest, err := storagetransport.Transport.ParseStoreReference(s.Storage(), img.RepoTags[0])
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := copy.Image(context.Background(), policy, dest, src, &copy.Options{SourceCtx: s.SystemContext(), DestinationCtx: s.SystemContext()}); err != nil {
			tb.Fatal(err)
		}
	}
	return s
}

func TestLookupNames(t *testing.T) {
	s := storeWithImages(t,
		testimage.Busybox("localhost/app:1"),
		testimage.Image{RepoTags: []string{"docker.io/library/busybox:latest"}, Config: testimage.Config{Labels: map[string]string{"b": "1"}}},
		testimage.Image{RepoTags: []string{"quay.io/team/tool:2"}, Config: testimage.Config{Labels: map[string]string{"t": "1"}}},
	)
	ctx := context.Background()
	app, err := s.Lookup(ctx, "app:1")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"localhost/app:1", "app:1", app.ID, app.ID[:12], "sha256:" + app.ID, app.RepoDigests[0]} {
		got, err := s.Lookup(ctx, name)
		if err != nil || got.ID != app.ID {
			t.Errorf("Lookup(%q) = %v, %v; want %s", name, got, err, app.ID)
		}
	}
	if app.TopLayer == "" || len(app.Layers) != 1 || app.Config.OS != "linux" || len(app.Config.Config.Cmd) == 0 {
		t.Errorf("image %+v", app)
	}
	for name, want := range map[string]string{"busybox": "docker.io/library/busybox:latest", "tool:2": "quay.io/team/tool:2", "team/tool:2": "quay.io/team/tool:2"} {
		got, err := s.Lookup(ctx, name)
		if err != nil || len(got.RepoTags) == 0 || got.RepoTags[0] != want {
			t.Errorf("Lookup(%q) = %v, %v; want %s", name, got, err, want)
		}
	}
	for _, name := range []string{"app:2", "tool", "other/tool:2", "localhost/busybox", "0000"} {
		if _, err := s.Lookup(ctx, name); !errors.Is(err, core.ErrNoSuchImage) {
			t.Errorf("Lookup(%q): %v, want no such image", name, err)
		}
	}
	for _, name := range []string{"", "UPPER", "a b"} {
		if _, err := s.Lookup(ctx, name); !errors.Is(err, core.ErrInvalidArgument) {
			t.Errorf("Lookup(%q): %v, want invalid argument", name, err)
		}
	}
}

func FuzzLookup(f *testing.F) {
	for _, seed := range []string{"app:1", "busybox", "sha256:", "sha256:0", "0", "localhost/app@sha256:" + sixtyFour, "a/b/c/d:e", "../x", "app:1@sha256:abc", "\x00"} {
		f.Add(seed)
	}
	s := storeWithImages(f, testimage.Busybox("localhost/app:1"))
	f.Fuzz(func(t *testing.T, name string) {
		img, err := s.Lookup(context.Background(), name)
		if err == nil {
			if img == nil || img.ID == "" {
				t.Fatalf("%q: found an empty image", name)
			}
			return
		}
		if !errors.Is(err, core.ErrNoSuchImage) && !errors.Is(err, core.ErrInvalidArgument) && !errors.Is(err, core.ErrAmbiguous) {
			t.Fatalf("%q: unexpected error kind %v", name, err)
		}
	})
}
