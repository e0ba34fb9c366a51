package apierror

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

var errNoSuchContainer = errors.New("no such container")

func TestWriteEngine(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		err        error
		wantStatus int
		want       EngineError
	}{
		{
			name:       "wrapped twice",
			status:     http.StatusNotFound,
			err:        fmt.Errorf("inspect %q: %w", "web", fmt.Errorf("lookup: %w", errNoSuchContainer)),
			wantStatus: http.StatusNotFound,
			want:       EngineError{Cause: "no such container", Message: `inspect "web": lookup: no such container`, Response: 404},
		},
		{
			name:       "unwrapped",
			status:     http.StatusConflict,
			err:        errors.New("name in use"),
			wantStatus: http.StatusConflict,
			want:       EngineError{Cause: "name in use", Message: "name in use", Response: 409},
		},
		{
			name:       "joined follows first branch",
			status:     http.StatusInternalServerError,
			err:        fmt.Errorf("remove: %w", errors.Join(fmt.Errorf("stop: %w", errNoSuchContainer), errors.New("other"))),
			wantStatus: http.StatusInternalServerError,
			want:       EngineError{Cause: "no such container", Message: "remove: stop: no such container\nother", Response: 500},
		},
		{
			name:       "informational status becomes 500",
			status:     http.StatusContinue,
			err:        errors.New("boom"),
			wantStatus: http.StatusInternalServerError,
			want:       EngineError{Cause: "boom", Message: "boom", Response: 500},
		},
		{
			name:       "nil error",
			status:     http.StatusBadRequest,
			wantStatus: http.StatusBadRequest,
			want:       EngineError{Cause: "Bad Request", Message: "Bad Request", Response: 400},
		},
		{
			name:       "invalid status becomes 500",
			status:     42,
			err:        errors.New("boom"),
			wantStatus: http.StatusInternalServerError,
			want:       EngineError{Cause: "boom", Message: "boom", Response: 500},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			rec.Header().Set("Content-Length", "999")
			WriteEngine(rec, tt.status, tt.err)
			if rec.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d", rec.Code, tt.wantStatus)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Fatalf("Content-Type %q, want application/json", ct)
			}
			if cl := rec.Header().Get("Content-Length"); cl != "" {
				t.Fatalf("stale Content-Length %q kept", cl)
			}
			var got EngineError
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatalf("body %q: %v", rec.Body, err)
			}
			if got != tt.want {
				t.Fatalf("body %+v, want %+v", got, tt.want)
			}
			var members map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &members); err != nil {
				t.Fatal(err)
			}
			for _, key := range []string{"cause", "message", "response"} {
				if _, ok := members[key]; !ok {
					t.Errorf("body %s lacks %q", rec.Body, key)
				}
			}
		})
	}
}

func TestEngineErrorIsError(t *testing.T) {
	var asValue error = EngineError{Cause: "c", Message: "m", Response: 404}
	var asPointer error = &EngineError{Cause: "c", Response: 404}
	if asValue.Error() != "m" || asPointer.Error() != "c" {
		t.Fatalf("Error() = %q, %q; want message, else cause", asValue.Error(), asPointer.Error())
	}
	var target EngineError
	if !errors.As(fmt.Errorf("call: %w", asValue), &target) || target.Response != 404 {
		t.Fatalf("errors.As did not find the EngineError")
	}
}

func TestRootCause(t *testing.T) {
	if RootCause(nil) != nil {
		t.Fatal("RootCause(nil) != nil")
	}
	err := fmt.Errorf("a: %w", fmt.Errorf("b: %w", errNoSuchContainer))
	if RootCause(err) != errNoSuchContainer {
		t.Fatalf("RootCause = %v", RootCause(err))
	}
	if got := RootCause(errors.Join(nil, errNoSuchContainer)); got != errNoSuchContainer {
		t.Fatalf("RootCause(join) = %v", got)
	}
}
