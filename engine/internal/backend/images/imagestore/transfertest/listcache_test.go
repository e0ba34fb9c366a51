package transfertest

import (
	"context"
	"slices"
	"testing"

	"github.com/berth-project/berth/engine/internal/core"
)

// listed is the set of names the store lists.
func (e *env) listed(t testing.TB) []string {
	t.Helper()
	list, err := e.store.List(context.Background(), core.ImageListOptions{All: true})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	var names []string
	for _, img := range list {
		names = append(names, img.Names...)
	}
	slices.Sort(names)
	return names
}

// TestListFollowsEveryChange: the listing is served from a cache, and every
// change of the store shows in the next listing, whichever path made it:
// the engine's own operations, and a write straight to containers/storage
// that nothing told the cache about.
func TestListFollowsEveryChange(t *testing.T) {
	e := newEnv(t)
	if got := e.listed(t); len(got) != 0 {
		t.Fatalf("fresh store lists %v", got)
	}
	id := e.load(t, "localhost/one:1")
	if got := e.listed(t); !slices.Equal(got, []string{"localhost/one:1"}) {
		t.Fatalf("after a load: %v", got)
	}
	// Straight to storage: only the store's own change record says so.
	if err := e.store.Storage().AddNames(id, []string{"localhost/two:2"}); err != nil {
		t.Fatal(err)
	}
	if got := e.listed(t); !slices.Equal(got, []string{"localhost/one:1", "localhost/two:2"}) {
		t.Fatalf("after adding a name in storage: %v", got)
	}
	list, _ := e.store.List(context.Background(), core.ImageListOptions{})
	if len(list) != 1 || list[0].Containers != 0 {
		t.Fatalf("listing %+v", list)
	}
	if _, err := e.store.Storage().CreateContainer("", nil, id, "", "", nil); err != nil {
		t.Fatal(err)
	}
	list, _ = e.store.List(context.Background(), core.ImageListOptions{})
	if len(list) != 1 || list[0].Containers != 1 {
		t.Fatalf("a container created in storage is not counted: %+v", list)
	}
	if _, err := e.store.Storage().DeleteImage(id, false); err == nil {
		t.Fatal("deleted an image in use")
	}
	containers, _ := e.store.Storage().Containers()
	for _, c := range containers {
		if err := e.store.Storage().DeleteContainer(c.ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.store.Storage().DeleteImage(id, true); err != nil {
		t.Fatal(err)
	}
	if got := e.listed(t); len(got) != 0 {
		t.Fatalf("after removing the image in storage: %v", got)
	}
}
