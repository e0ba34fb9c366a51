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

// TestCacheMountsPrune: a prune removes the cache directories no step holds,
// by rename into the trash directory (emptied after), with their bytes; a
// held one, one changed after until, and plain files stay.
func TestCacheMountsPrune(t *testing.T) {
	root, trash := t.TempDir(), t.TempDir()
	for name, data := range map[string]string{"a/f": "12345", "a/sub/g": "678", "b/f": "x", "c/f": "new"} {
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
	for _, d := range []string{"a", "b"} {
		if err := os.Chtimes(filepath.Join(root, d), old, old); err != nil {
			t.Fatal(err)
		}
	}
	var c cacheMounts
	release := c.hold(filepath.Join(root, "b"))
	names, freed, err := c.prune(root, trash, time.Now().Add(-time.Hour))
	if err != nil || !slices.Equal(names, []string{"a"}) || freed != 8 {
		t.Fatalf("prune: %v, %d bytes, %v; want [a], 8 bytes", names, freed, err)
	}
	release()
	names, _, err = c.prune(root, trash, time.Time{})
	if err != nil || !slices.Equal(names, []string{"b", "c"}) {
		t.Fatalf("second prune: %v, %v; want [b c]", names, err)
	}
	left, _ := os.ReadDir(root)
	if len(left) != 1 || left[0].Name() != "stray" {
		t.Fatalf("left in the cache root: %v", left)
	}
	if inTrash, _ := os.ReadDir(trash); len(inTrash) != 0 {
		t.Fatalf("left in the trash: %v", inTrash)
	}
	if len(c.inUse) != 0 {
		t.Fatalf("holds left: %v", c.inUse)
	}
}
