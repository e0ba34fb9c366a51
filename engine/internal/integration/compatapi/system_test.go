package compatapi

import (
	"net/http"
	"testing"
)

// TestReferenceIDOnEveryResponse: like Podman's API server, every answer
// carries X-Reference-Id, the client's own echoed: libpod's and Docker's
// routes, errors and unknown paths alike.
func TestReferenceIDOnEveryResponse(t *testing.T) {
	te := startEngine(t)
	for _, path := range []string{"/_ping", "/v5.0.0/libpod/info", "/v5.0.0/libpod/containers/nosuch/json", "/v5.0.0/libpod/nosuch", "/v1.41/containers/json", "/v1.41/images/nosuch/json"} {
		req, err := http.NewRequest("GET", te.Base()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := te.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		ref := resp.Header.Get("X-Reference-Id")
		if ref == "" {
			t.Fatalf("GET %s (%d): no X-Reference-Id", path, resp.StatusCode)
		}
		req.Header.Set("X-Reference-Id", "client-ref-1")
		if resp, err = te.Client.Do(req); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("X-Reference-Id"); got != "client-ref-1" {
			t.Fatalf("GET %s with X-Reference-Id client-ref-1: answered %q", path, got)
		}
	}
}
