package systemapi

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/shared/apierror"
)

func TestSystemPrune(t *testing.T) {
	te := startEngine(t)
	te.Load(
		imageWith([]string{"localhost/prune-kept:1"}, "k", 10, nil),
		imageWith(nil, "dangling", 2000, map[string]string{"prune": "yes"}),
	)
	labelled := te.Create(map[string]any{"image": "localhost/prune-kept:1", "command": []string{"true"}, "labels": map[string]string{"prune": "yes"}})
	plain := te.Create(map[string]any{"image": "localhost/prune-kept:1", "command": []string{"true"}})
	running := te.Create(map[string]any{"image": "localhost/prune-kept:1", "command": []string{"sleep", "60"}})
	te.Must(http.StatusNoContent, "POST", "/containers/"+running+"/start", nil)
	te.Must(http.StatusCreated, "POST", "/volumes/create", map[string]any{"Name": "prune-vol", "Labels": map[string]string{"prune": "yes"}})

	// A label filter reaches every kind: the labelled container and the
	// labelled dangling image go, nothing else; volumes stay without volumes=true.
	var first core.SystemPruneReport
	te.Decode(te.Must(http.StatusOK, "POST", "/system/prune?filters="+filters(map[string][]string{"label": {"prune=yes"}}), nil), &first)
	if ids := pruned(first.ContainerPruneReports); !slices.Equal(ids, []string{labelled}) {
		t.Errorf("containers pruned with the label filter: %v, want only %s", ids, labelled)
	}
	if len(first.ImagePruneReports) != 1 || first.ImagePruneReports[0].Size < 2000 {
		t.Errorf("images pruned with the label filter: %+v, want the dangling image", first.ImagePruneReports)
	}
	if len(first.VolumePruneReports) != 0 || first.ReclaimedSpace < 2000 {
		t.Errorf("volumes pruned without volumes=true: %+v; reclaimed %d", first.VolumePruneReports, first.ReclaimedSpace)
	}
	te.Must(http.StatusNoContent, "GET", "/containers/"+plain+"/exists", nil)

	// Podman 4 clients split label=k=v into two values; the 4.x path joins them.
	status, body := enginetest4(te, "POST", "/system/prune?filters="+filters(map[string][]string{"label": {"prune", "yes"}}))
	if status != http.StatusOK {
		t.Fatalf("prune under /v4.3.1: %d %s", status, body)
	}

	// all + volumes: the stopped container, then the image nothing uses any
	// more (the running container keeps its own), then the unused volume.
	var second core.SystemPruneReport
	te.Decode(te.Must(http.StatusOK, "POST", "/system/prune?all=true&volumes=true", nil), &second)
	if ids := pruned(second.ContainerPruneReports); !slices.Equal(ids, []string{plain}) {
		t.Errorf("containers pruned: %v, want %s", ids, plain)
	}
	if len(second.VolumePruneReports) != 1 || second.VolumePruneReports[0].ID != "prune-vol" {
		t.Errorf("volumes pruned: %+v", second.VolumePruneReports)
	}
	if len(second.ImagePruneReports) != 0 {
		t.Errorf("the image of a running container was pruned: %+v", second.ImagePruneReports)
	}
	te.Must(http.StatusNoContent, "GET", "/containers/"+running+"/exists", nil)
	te.Must(http.StatusOK, "DELETE", "/containers/"+running+"?force=true&timeout=0", nil)
	var third core.SystemPruneReport
	te.Decode(te.Must(http.StatusOK, "POST", "/system/prune?all=true", nil), &third)
	if len(third.ImagePruneReports) != 1 || third.ReclaimedSpace == 0 {
		t.Errorf("with its last container gone the image goes: %+v", third)
	}

	for _, tc := range []struct{ query, param string }{
		{"filters=" + filters(map[string][]string{"bogus": {"x"}}), "filters"},
		{"filters=notjson", "filters"},
		{"all=maybe", "all"},
		{"volumes=2x", "volumes"},
		{"external=true", "external"},
	} {
		status, body := te.Do("POST", "/system/prune?"+tc.query, nil)
		var e apierror.EngineError
		te.Decode(body, &e)
		if status != http.StatusBadRequest || e.Response != http.StatusBadRequest || !strings.Contains(e.Message, tc.param) {
			t.Errorf("prune?%s: %d %s, want 400 naming %s", tc.query, status, body, tc.param)
		}
	}
}

// enginetest4 sends a request under /v4.3.1/libpod.
func enginetest4(te *testEngine, method, path string) (int, []byte) {
	te.T.Helper()
	return enginetest4Path(te, method, "/v4.3.1/libpod"+path)
}

// enginetest4Path sends a request to a full path.
func enginetest4Path(te *testEngine, method, path string) (int, []byte) {
	te.T.Helper()
	return enginetest.Do(te.T, te.Client, method, te.Base(), path, nil)
}

// pruned lists the IDs of prune reports.
func pruned(reports []*core.PruneReport) []string {
	var ids []string
	for _, r := range reports {
		ids = append(ids, r.ID)
	}
	return ids
}
