package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func probe(t *testing.T, h http.Handler) (int, map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("body %q: %v", rec.Body, err)
	}
	return rec.Code, body
}

func TestHealthz(t *testing.T) {
	code, body := probe(t, Healthz())
	if code != 200 || !reflect.DeepEqual(body, map[string]any{"status": "ok"}) {
		t.Fatalf("got %d %v", code, body)
	}
}

func TestReadyz(t *testing.T) {
	ok := func(context.Context) error { return nil }
	down := func(context.Context) error { return errors.New("dial tcp 127.0.0.1:5432: connection refused") }
	tests := []struct {
		name   string
		checks map[string]Check
		code   int
		want   map[string]any
	}{
		{"no checks", nil, 200, map[string]any{"status": "ok"}},
		{"all pass", map[string]Check{"database": ok, "engine": ok}, 200,
			map[string]any{"status": "ok", "checks": map[string]any{"database": "ok", "engine": "ok"}}},
		{"one fails", map[string]Check{"database": down, "engine": ok}, 503,
			map[string]any{"status": "unavailable", "checks": map[string]any{"database": "dial tcp 127.0.0.1:5432: connection refused", "engine": "ok"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := probe(t, Readyz(tt.checks))
			if code != tt.code || !reflect.DeepEqual(body, tt.want) {
				t.Fatalf("got %d %v, want %d %v", code, body, tt.code, tt.want)
			}
		})
	}
}

func TestReadyzRunsChecksConcurrentlyAndHonoursCancel(t *testing.T) {
	// Each check waits until all three are running: run one after another,
	// the first would give up and the probe would fail.
	var arrived sync.WaitGroup
	arrived.Add(3)
	allRunning := make(chan struct{})
	go func() { arrived.Wait(); close(allRunning) }()
	barrier := func(ctx context.Context) error {
		arrived.Done()
		select {
		case <-allRunning:
			return nil
		case <-time.After(5 * time.Second):
			return errors.New("checks did not run concurrently")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if code, body := probe(t, Readyz(map[string]Check{"a": barrier, "b": barrier, "c": barrier})); code != 200 {
		t.Fatalf("status %d %v", code, body)
	}

	waitForCancel := func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := httptest.NewRecorder()
	Readyz(map[string]Check{"db": waitForCancel}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil).WithContext(ctx))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "context canceled") {
		t.Fatalf("cancelled probe answered %d %s", rec.Code, rec.Body)
	}
}
