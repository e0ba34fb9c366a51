package imagesapi

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestImageUsedByContainer: an image a container was created from cannot be
// removed or pruned without force; forced removal removes the container too.
func TestImageUsedByContainer(t *testing.T) {
	e := startEngine(t)
	e.load(busybox("localhost/used:1"), busybox("localhost/used:2"))
	store := e.Eng.Images().Storage()
	img, err := store.Image("localhost/used:1")
	if err != nil {
		t.Fatal(err)
	}
	ctr, err := store.CreateContainer("", []string{"user-of-used"}, img.ID, "", "", nil)
	if err != nil {
		t.Fatal(err)
	}

	list := e.list(filtersQuery(map[string][]string{"reference": {"used:1"}}))
	if len(list) != 1 || list[0].Containers != 1 {
		t.Fatalf("listing: %+v", list)
	}
	if got := e.list(filtersQuery(map[string][]string{"containers": {"true"}})); len(got) != 1 {
		t.Errorf("containers=true matched %d images", len(got))
	}

	// used:1 and used:2 are one image (same config): removing one tag only untags.
	e.do(http.MethodDelete, "/libpod/images/used:2", nil).expect(t, http.StatusOK)
	e.do(http.MethodDelete, "/libpod/images/used:1", nil).engineError(t, http.StatusConflict)
	var batch struct {
		ExitCode int
		Errors   []string
	}
	e.do(http.MethodDelete, "/libpod/images/remove?images=used:1", nil).expect(t, http.StatusOK).json(t, &batch)
	if batch.ExitCode != 2 || len(batch.Errors) != 1 {
		t.Errorf("batch remove of an image in use: %+v", batch)
	}
	if pruned := e.prune("?all=true"); len(pruned) != 0 {
		t.Errorf("prune removed an image in use: %+v", pruned)
	}
	e.do(http.MethodGet, "/libpod/images/used:1/exists", nil).expect(t, http.StatusNoContent)

	var r struct{ Deleted []string }
	e.do(http.MethodDelete, "/libpod/images/"+url.PathEscape("used:1")+"?force=true", nil).expect(t, http.StatusOK).json(t, &r)
	if len(r.Deleted) != 1 || r.Deleted[0] != img.ID {
		t.Errorf("forced removal: %+v", r)
	}
	if _, err := store.Container(ctr.ID); err == nil {
		t.Error("the container using the image survived forced removal")
	}
	e.do(http.MethodGet, "/libpod/images/used:1/exists", nil).expect(t, http.StatusNotFound)
}

// TestForcedRemovalRemovesEngineContainers: a container created through the
// API blocks removal of its image; force removes the container through the
// container backend.
func TestForcedRemovalRemovesEngineContainers(t *testing.T) {
	e := startEngine(t)
	e.load(busybox("localhost/ctr-image:1"))
	create := e.do(http.MethodPost, "/v4.3.1/libpod/containers/create",
		strings.NewReader(`{"image":"localhost/ctr-image:1","name":"uses-image","command":["true"],"netns":{"nsmode":"none"}}`))
	if create.status == http.StatusNotFound && strings.Contains(string(create.body), "no such route") {
		t.Skip("the engine serves no container routes")
	}
	create.expect(t, http.StatusCreated)
	e.do(http.MethodGet, "/libpod/containers/uses-image/exists", nil).expect(t, http.StatusNoContent)

	e.do(http.MethodDelete, "/libpod/images/ctr-image:1", nil).engineError(t, http.StatusConflict)
	e.do(http.MethodGet, "/libpod/containers/uses-image/exists", nil).expect(t, http.StatusNoContent)

	e.do(http.MethodDelete, "/libpod/images/ctr-image:1?force=true", nil).expect(t, http.StatusOK)
	e.do(http.MethodGet, "/libpod/containers/uses-image/exists", nil).expect(t, http.StatusNotFound)
	e.do(http.MethodGet, "/libpod/images/ctr-image:1/exists", nil).expect(t, http.StatusNotFound)
}
