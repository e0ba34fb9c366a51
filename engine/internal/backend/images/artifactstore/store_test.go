package artifactstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-project/berth/engine/internal/core"
)

func entryWith(name, artifactType string, titles ...string) *entry {
	m := newManifest(artifactType)
	for _, title := range titles {
		m.Layers = append(m.Layers, imgspecv1.Descriptor{Annotations: map[string]string{imgspecv1.AnnotationTitle: title}})
	}
	return &entry{name: name, manifest: m, desc: imgspecv1.Descriptor{Digest: digest.Digest("sha256:" + strings.Repeat("ab", 32))}}
}

// TestAdmit is the rule table of when an add may go on.
func TestAdmit(t *testing.T) {
	existing := []*entry{entryWith("art:latest", "type/one", "a.txt")}
	for _, c := range []struct {
		name    string
		opts    core.ArtifactAddOptions
		want    error
		wantLen int
	}{
		{"new name", core.ArtifactAddOptions{FileName: "x"}, nil, 0},
		{"name in use", core.ArtifactAddOptions{FileName: "x"}, core.ErrNameInUse, 0},
		{"append", core.ArtifactAddOptions{FileName: "b.txt", Append: true}, nil, 1},
		{"append same type", core.ArtifactAddOptions{FileName: "b.txt", Append: true, ArtifactMIMEType: "type/one"}, nil, 1},
		{"append other type", core.ArtifactAddOptions{FileName: "b.txt", Append: true, ArtifactMIMEType: "type/two"}, core.ErrInvalidArgument, 0},
		{"append same file", core.ArtifactAddOptions{FileName: "a.txt", Append: true}, core.ErrNameInUse, 0},
		{"replace", core.ArtifactAddOptions{FileName: "a.txt", Replace: true}, nil, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := "art:latest"
			if c.name == "new name" {
				name = "other:latest"
			}
			m, err := admit(existing, name, c.opts)
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Fatalf("admit: %v, want %v", err, c.want)
			}
			if err == nil && len(m.Layers) != c.wantLen {
				t.Errorf("manifest has %d layers, want %d", len(m.Layers), c.wantLen)
			}
		})
	}
	if _, err := admit(nil, "none:latest", core.ArtifactAddOptions{FileName: "x", Append: true}); !errors.Is(err, core.ErrNoSuchArtifact) {
		t.Errorf("append to nothing: %v", err)
	}
}

// TestFind resolves names (with the default tag) and digest prefixes.
func TestFind(t *testing.T) {
	entries := []*entry{entryWith("quay.io/org/art:latest", ""), entryWith("localhost:5000/x:2", "")}
	entries[1].desc.Digest = digest.Digest("sha256:" + strings.Repeat("cd", 32))
	for _, c := range []struct {
		given, want string
		err         error
	}{
		{"quay.io/org/art", "quay.io/org/art:latest", nil},
		{"quay.io/org/art:latest", "quay.io/org/art:latest", nil},
		{"localhost:5000/x:2", "localhost:5000/x:2", nil},
		{"localhost:5000/x", "", core.ErrNoSuchArtifact},
		{"cdcdcd", "localhost:5000/x:2", nil},
		{"sha256:" + strings.Repeat("ab", 32), "quay.io/org/art:latest", nil},
		{"ef", "", core.ErrNoSuchArtifact},
		{"", "", core.ErrInvalidArgument},
	} {
		e, err := find(entries, c.given)
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("find(%q): %v, want %v", c.given, err, c.err)
			}
			continue
		}
		if err != nil || e.name != c.want {
			t.Errorf("find(%q) = %v, %v; want %s", c.given, e, err, c.want)
		}
	}
}

// FuzzArtifactName checks that any client-given name is either refused as
// an invalid argument or stored in a form that names it again.
func FuzzArtifactName(f *testing.F) {
	for _, seed := range []string{"art", "quay.io/org/art:1", "localhost:5000/a", "a@sha256:" + strings.Repeat("0", 64), "", "A B", "x:"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, name string) {
		stored, err := artifactName(name)
		if err != nil {
			if !errors.Is(err, core.ErrInvalidArgument) {
				t.Fatalf("artifactName(%q): %v is not an invalid argument", name, err)
			}
			return
		}
		if withDefaultTag(stored) != stored {
			t.Fatalf("artifactName(%q) = %q, which is not stable", name, stored)
		}
		if _, err := find([]*entry{{name: stored}}, name); err != nil {
			t.Fatalf("%q stored as %q is not found by its name: %v", name, stored, err)
		}
	})
}

// TestAddOverTheBound refuses a file larger than the store's bound with
// core.ErrTooLarge and leaves no artifact, staging file or blob behind.
func TestAddOverTheBound(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "artifacts")
	s, err := Open(Options{Dir: dir, MaxFileSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err = s.Add(ctx, core.ArtifactAddOptions{Name: "big", FileName: "f"}, strings.NewReader("eleven byte"))
	if !errors.Is(err, core.ErrTooLarge) {
		t.Fatalf("add over the bound: %v", err)
	}
	if _, err := s.Add(ctx, core.ArtifactAddOptions{Name: "small", FileName: "f"}, strings.NewReader("ten bytes!")); err != nil {
		t.Fatalf("add at the bound: %v", err)
	}
	list, err := s.List(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "small:latest" {
		t.Fatalf("list: %+v %v", list, err)
	}
	if staged, _ := os.ReadDir(dir + "-staging"); len(staged) != 0 {
		t.Errorf("staging holds %d files", len(staged))
	}
	// The empty config, the file and the manifest of "small".
	if blobs, _ := os.ReadDir(filepath.Join(dir, "blobs", "sha256")); len(blobs) != 3 {
		t.Errorf("%d blobs, want 3", len(blobs))
	}
}
