package handlers

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/httpwire"
)

// TestJSONBodiesAreBoundedAndWhole: every JSON endpoint refuses a body over
// 4 MiB with 413 and data after the JSON value with 400, through the one
// decoder (before: 400 "unexpected EOF" and acceptance of the garbage).
func TestJSONBodiesAreBoundedAndWhole(t *testing.T) {
	s := &Server{}
	endpoints := map[string]http.HandlerFunc{
		"container create": containerHandlers{}.create,
		"container update": containerHandlers{}.update,
		"exec create":      s.execCreate,
		"exec start":       s.execStart,
		"volume create":    volumeHandlers{}.create,
	}
	huge := `{"labels":{"a":"` + strings.Repeat("x", 5<<20) + `"}}`
	bodies := []struct {
		name   string
		body   string
		status int
		cause  string
	}{
		{"over 4 MiB", huge, http.StatusRequestEntityTooLarge, "larger than 4 MiB"},
		{"trailing garbage", `{}garbage`, http.StatusBadRequest, "after the JSON value"},
		{"second value", `{} {}`, http.StatusBadRequest, "after the JSON value"},
		{"truncated", `{"a":`, http.StatusBadRequest, "not a complete JSON value"},
	}
	for name, handler := range endpoints {
		for _, b := range bodies {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(b.body))
			handler(rec, req)
			if rec.Code != b.status {
				t.Errorf("%s, %s: status %d (%s), want %d", name, b.name, rec.Code, rec.Body.Bytes(), b.status)
				continue
			}
			var e struct {
				Cause, Message string
				Response       int
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Response != b.status || !strings.Contains(e.Message, b.cause) {
				t.Errorf("%s, %s: body %.200s, want an error saying %q", name, b.name, rec.Body.Bytes(), b.cause)
			}
		}
	}
}

func TestDecodeJSON(t *testing.T) {
	type target struct {
		N int `json:"n"`
	}
	for _, tc := range []struct {
		body     string
		emptyOK  bool
		present  bool
		wantErr  string
		wantCode int
	}{
		{body: `{"n":1}`, present: true},
		{body: "{\"n\":1}\n \t", present: true},
		{body: ``, emptyOK: true},
		{body: `  `, emptyOK: true},
		{body: ``, wantErr: "body", wantCode: http.StatusBadRequest},
		{body: `{"n":"one"}`, wantErr: "invalid n", wantCode: http.StatusBadRequest},
		{body: `{"n":1}x`, wantErr: "after the JSON value", wantCode: http.StatusBadRequest},
		{body: `{"n":1}` + strings.Repeat(" ", 4<<20), wantErr: "larger than", wantCode: http.StatusRequestEntityTooLarge},
	} {
		var dst target
		present, err := decodeJSON(bytes.NewReader([]byte(tc.body)), &dst, tc.emptyOK)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%.40q: %v", tc.body, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || httpwire.StatusOf(err) != tc.wantCode):
			t.Errorf("%.40q: %v, want an error with %q answered %d", tc.body, err, tc.wantErr, tc.wantCode)
		case tc.wantErr == "" && present != tc.present:
			t.Errorf("%.40q: present %v, want %v", tc.body, present, tc.present)
		}
	}
	// Exactly at the bound is accepted.
	exact := `{"n":1}` + strings.Repeat(" ", maxJSONBody-7)
	var dst target
	if _, err := decodeJSON(strings.NewReader(exact), &dst, false); err != nil {
		t.Errorf("a body of exactly %d bytes: %v", maxJSONBody, err)
	}
}
