package api_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-project/berth/uploads/internal/api"
)

// TestErrorsDoNotEchoHugePaths: a 400 for a 70,000-byte path answers a
// small body (before: the path twice, 140 KB).
func TestErrorsDoNotEchoHugePaths(t *testing.T) {
	e := newEnv(t, envOpts{})
	id := e.create()
	huge := strings.Repeat("a", 35000) + "/../" + strings.Repeat("b", 35000)
	r := e.raw("PUT", "/v1/uploads/"+id+"/files/"+huge, "x", "Content-Type", "application/octet-stream")
	r.problem(t, http.StatusBadRequest)
	if len(r.body) > 2048 {
		t.Fatalf("a 400 for a %d-byte path is %d bytes", len(huge), len(r.body))
	}
	r = e.raw("GET", "/v1/"+strings.Repeat("c", 70000), "")
	r.problem(t, http.StatusNotFound)
	if len(r.body) > 2048 {
		t.Fatalf("a 404 for a 70,000-byte path is %d bytes", len(r.body))
	}
}

// TestTemporariesCountAgainstTheUploadSize: a temporary a killed writer
// left behind counts against the upload's size limit while it exists
// (before: it counted against nothing), and the sweep of temporaries whose
// writer is gone removes it at once, whatever its age.
func TestTemporariesCountAgainstTheUploadSize(t *testing.T) {
	e := newEnv(t, envOpts{limits: api.Limits{MaxUploadSize: 1000}})
	id := e.create()
	leftover := filepath.Join(e.dataDir, "uploads", id, "tmp", "put-leftoverofakilledwriter")
	if err := os.WriteFile(leftover, make([]byte, 700), 0o640); err != nil {
		t.Fatal(err)
	}
	if p := e.put(id, "f", strings.Repeat("x", 500)).problem(t, http.StatusRequestEntityTooLarge); p["limit"] != "maxUploadSize" {
		t.Fatalf("413 for %v, want maxUploadSize", p["limit"])
	}
	e.mustPut(id, "small", strings.Repeat("x", 200))
}
