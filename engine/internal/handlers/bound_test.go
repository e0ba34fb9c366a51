package handlers

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/berth-project/berth/engine/internal/core"
)

// TestBoundHandlers checks the handlers the route table binds to core's
// methods (getHandler, namedHandler, namedActionHandler, existsHandler,
// filteredHandler and the pod actions): what each passes down, its status
// and body, and that an error or a bad query answers as the handwritten
// handlers did.
func TestBoundHandlers(t *testing.T) {
	get := func(_ context.Context, name string) (map[string]string, error) {
		if name == "missing" {
			return nil, core.NoSuchVolume(name)
		}
		return map[string]string{"Name": name}, nil
	}
	var gotTimeout *uint
	r := chi.NewRouter()
	r.Get("/all", getHandler(func(context.Context) ([]string, error) { return []string{"a", "b"}, nil }))
	r.Get("/failing", getHandler(func(context.Context) ([]string, error) { return nil, errors.New("boom") }))
	r.Get("/things/{name}/json", namedHandler(get))
	r.Get("/things/{name}/exists", existsHandler(get, core.ErrNoSuchVolume))
	r.Post("/things/{name}/start", namedActionHandler(func(ctx context.Context, name string) error {
		_, err := get(ctx, name)
		return err
	}))
	r.Get("/things/json", filteredHandler(func(_ context.Context, f map[string][]string) ([]string, error) {
		return f["label"], nil
	}))
	r.Post("/pods/{name}/start", podActionHandler(func(_ context.Context, name string) (*core.PodActionReport, error) {
		if name == "half" {
			return &core.PodActionReport{ID: name, Errs: []string{"one failed"}}, nil
		}
		return &core.PodActionReport{ID: name}, nil
	}))
	r.Post("/pods/{name}/stop", timedPodActionHandler(func(_ context.Context, name string, timeout *uint) (*core.PodActionReport, error) {
		gotTimeout = timeout
		return &core.PodActionReport{ID: name}, nil
	}))
	for _, c := range []struct {
		method, target string
		status         int
		body           string // a part of the body
	}{
		{http.MethodGet, "/all", http.StatusOK, `["a","b"]`},
		{http.MethodGet, "/failing", http.StatusInternalServerError, "boom"},
		{http.MethodGet, "/things/vol%2F1/json", http.StatusOK, `{"Name":"vol/1"}`},
		{http.MethodGet, "/things/missing/json", http.StatusNotFound, "missing"},
		{http.MethodGet, "/things/here/exists", http.StatusNoContent, ""},
		{http.MethodGet, "/things/missing/exists", http.StatusNotFound, "missing"},
		{http.MethodPost, "/things/here/start", http.StatusNoContent, ""},
		{http.MethodPost, "/things/missing/start", http.StatusNotFound, "missing"},
		{http.MethodGet, `/things/json?filters={"label":["x=y"]}`, http.StatusOK, `["x=y"]`},
		{http.MethodGet, "/things/json?filters=notjson", http.StatusBadRequest, "filters"},
		{http.MethodPost, "/pods/p1/start", http.StatusOK, `"Id":"p1"`},
		{http.MethodPost, "/pods/half/start", http.StatusConflict, "one failed"},
		{http.MethodPost, "/pods/p1/stop?timeout=7", http.StatusOK, `"Id":"p1"`},
		{http.MethodPost, "/pods/p1/stop?timeout=soon", http.StatusBadRequest, "timeout"},
	} {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(c.method, c.target, nil))
		if rec.Code != c.status || !strings.Contains(rec.Body.String(), c.body) {
			t.Errorf("%s %s: %d %s; want %d with %q", c.method, c.target, rec.Code, rec.Body.String(), c.status, c.body)
		}
	}
	if gotTimeout == nil || *gotTimeout != 7 {
		t.Errorf("stop got timeout %v, want 7", gotTimeout)
	}
}
