package build

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/images/imagestore"
)

// TestImageMetadataKey: the metadata a build records on its step images
// carries the key the image store's build cache prune looks for.
func TestImageMetadataKey(t *testing.T) {
	raw, err := json.Marshal(imageMetadata{CacheKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"` + imagestore.BuildCacheMetadataKey + `":"k"}`; string(raw) != want {
		t.Fatalf("metadata %s, want %s", raw, want)
	}
}

// TestPruneCacheDirs: a prune removes the cache directories changed before
// until, by rename into the trash directory (emptied after), with their
// bytes; plain files stay.
func TestPruneCacheDirs(t *testing.T) {
	root, trash := t.TempDir(), t.TempDir()
	for name, data := range map[string]string{"a/f": "12345", "a/sub/g": "678", "b/f": "new"} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "stray"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(filepath.Join(root, "a"), old, old); err != nil {
		t.Fatal(err)
	}
	names, freed, err := pruneCacheDirs(root, trash, time.Now().Add(-time.Hour))
	if err != nil || !slices.Equal(names, []string{"a"}) || freed != 8 {
		t.Fatalf("prune: %v, %d bytes, %v; want [a], 8 bytes", names, freed, err)
	}
	names, freed, err = pruneCacheDirs(root, trash, time.Time{})
	if err != nil || !slices.Equal(names, []string{"b"}) || freed != 3 {
		t.Fatalf("second prune: %v, %d bytes, %v; want [b], 3 bytes", names, freed, err)
	}
	left, _ := os.ReadDir(root)
	if len(left) != 1 || left[0].Name() != "stray" {
		t.Fatalf("left in the cache root: %v", left)
	}
	if inTrash, _ := os.ReadDir(trash); len(inTrash) != 0 {
		t.Fatalf("left in the trash: %v", inTrash)
	}
}

// TestRestartRemovesPrunedCacheDirs: cache directories a prune had moved
// into its trash when the engine was killed are gone after the next start;
// the cache directories still in place stay.
func TestRestartRemovesPrunedCacheDirs(t *testing.T) {
	root, runRoot := t.TempDir(), t.TempDir()
	trashed := filepath.Join(root, "tmp", tmpPrefix+"cache-123", "abc")
	kept := filepath.Join(root, "build-cache", "def")
	for _, dir := range []string{trashed, kept} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := New(Options{Root: root, RunRoot: runRoot}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(trashed)); !os.IsNotExist(err) {
		t.Fatalf("the killed prune's trash is still there: %v", err)
	}
	if _, err := os.Stat(kept); err != nil {
		t.Fatalf("a cache directory went at start: %v", err)
	}
}
