package swagger

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const embeddedSpec = "openapi: 3.0.0\ninfo:\n  title: embedded\n"

func get(t *testing.T, h http.Handler, method string, header http.Header) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, "/v4.3.1/libpod/swagger", nil)
	for key, values := range header {
		req.Header[key] = values
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestServeSwaggerPrefersFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "swagger.yaml")
	if err := os.WriteFile(path, []byte("openapi: 3.0.0\ninfo:\n  title: installed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := ServeSwagger(path, []byte(embeddedSpec))
	rec := get(t, h, http.MethodGet, nil)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "title: installed") {
		t.Fatalf("got %d %q, want the installed file", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/yaml" {
		t.Fatalf("Content-Type %q, want application/yaml", ct)
	}
	if rec.Header().Get("Last-Modified") == "" {
		t.Fatal("no Last-Modified for a file")
	}

	// The file is read per request: an update is served without a new handler.
	if err := os.WriteFile(path, []byte("openapi: 3.0.0\ninfo:\n  title: updated\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if rec := get(t, h, http.MethodGet, nil); !strings.Contains(rec.Body.String(), "title: updated") {
		t.Fatalf("got %q after update", rec.Body)
	}

	// Removing the file falls back to the embedded copy.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if rec := get(t, h, http.MethodGet, nil); rec.Code != http.StatusOK || rec.Body.String() != embeddedSpec {
		t.Fatalf("got %d %q after removal, want the embedded copy", rec.Code, rec.Body)
	}
}

func TestServeSwaggerFallsBackToEmbedded(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.yaml")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{
		"missing file":  filepath.Join(dir, "missing.yaml"),
		"directory":     dir,
		"empty file":    empty,
		"no path":       "",
		"missing dir":   filepath.Join(dir, "no", "such", "swagger.yaml"),
		"file as a dir": filepath.Join(empty, "swagger.yaml"),
	} {
		t.Run(name, func(t *testing.T) {
			rec := get(t, ServeSwagger(path, []byte(embeddedSpec)), http.MethodGet, nil)
			if rec.Code != http.StatusOK || rec.Body.String() != embeddedSpec {
				t.Fatalf("got %d %q, want the embedded copy", rec.Code, rec.Body)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/yaml" {
				t.Fatalf("Content-Type %q", ct)
			}
		})
	}
}

func TestServeSwaggerNeitherFileNorEmbedded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.yaml")
	rec := get(t, ServeSwagger(path, nil), http.MethodGet, nil)
	if rec.Code != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	var body struct {
		Cause    string `json:"cause"`
		Message  string `json:"message"`
		Response int    `json:"response"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("body %q: %v", rec.Body, err)
	}
	if body.Response != 500 || !strings.Contains(body.Message, path) || !strings.Contains(body.Cause, "no such file") {
		t.Fatalf("body %+v, want a 500 naming the path and the cause", body)
	}
}

func TestServeSwaggerHeadRangeAndJSON(t *testing.T) {
	h := ServeSwagger("", []byte(embeddedSpec))
	head := get(t, h, http.MethodHead, nil)
	if head.Code != http.StatusOK || head.Body.Len() != 0 || head.Header().Get("Content-Length") != strconv.Itoa(len(embeddedSpec)) {
		t.Fatalf("HEAD: %d, body %q, Content-Length %q", head.Code, head.Body, head.Header().Get("Content-Length"))
	}
	partial := get(t, h, http.MethodGet, http.Header{"Range": {"bytes=0-6"}})
	if partial.Code != http.StatusPartialContent || partial.Body.String() != "openapi" {
		t.Fatalf("Range: %d %q", partial.Code, partial.Body)
	}
	jsonSpec := ServeSwagger("", []byte("\n {\"openapi\":\"3.0.0\"}"))
	if ct := get(t, jsonSpec, http.MethodGet, nil).Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("JSON document served as %q", ct)
	}
}
