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
