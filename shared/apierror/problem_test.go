package apierror

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

func TestWriteProblem(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteProblem(rec, Problem{
		Type:   "https://berth.example/problems/upload-state",
		Title:  "Upload is not open",
		Status: http.StatusConflict,
		Detail: "upload 3f0c is pending; files can only be written while it is open",
		Extra:  map[string]any{"uuid": "3f0c", "status": "pending", "allowed": []string{"open"}},
	})
	if rec.Code != http.StatusConflict {
		t.Fatalf("status %d, want 409", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q", ct)
	}
	var got map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatalf("body %q: %v", rec.Body, err)
	}
	want := map[string]any{
		"type":    "https://berth.example/problems/upload-state",
		"title":   "Upload is not open",
		"status":  float64(409),
		"detail":  "upload 3f0c is pending; files can only be written while it is open",
		"uuid":    "3f0c",
		"allowed": []any{"open"},
	}
	// The Extra "status" must neither replace the standard member nor appear twice.
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("body %v, want %v", got, want)
	}
}

func TestProblemExtraCannotOverrideStandardMembers(t *testing.T) {
	p := Problem{
		Type: "about:blank", Title: "Not Found", Status: 404, Detail: "no upload 1",
		Extra: map[string]any{"type": "evil", "title": "evil", "status": 200, "detail": "evil", "uuid": "1"},
	}
	encoded, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"about:blank","title":"Not Found","status":404,"detail":"no upload 1","uuid":"1"}`
	if string(encoded) != want {
		t.Fatalf("Marshal = %s, want %s", encoded, want)
	}
}

func TestProblemDefaults(t *testing.T) {
	tests := []struct {
		in   Problem
		want string
	}{
		{Problem{Status: 404}, `{"type":"about:blank","title":"Not Found","status":404,"detail":""}`},
		{Problem{}, `{"type":"about:blank","title":"Internal Server Error","status":500,"detail":""}`},
		{Problem{Status: 1000, Detail: "x"}, `{"type":"about:blank","title":"Internal Server Error","status":500,"detail":"x"}`},
		{Problem{Status: 103, Detail: "x"}, `{"type":"about:blank","title":"Internal Server Error","status":500,"detail":"x"}`},
		{Problem{Status: 413, Title: "Upload too large", Extra: map[string]any{"limit": 10}}, `{"type":"about:blank","title":"Upload too large","status":413,"detail":"","limit":10}`},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		WriteProblem(rec, tt.in)
		if got := strings.TrimSpace(rec.Body.String()); got != tt.want {
			t.Errorf("WriteProblem(%+v) body %s, want %s", tt.in, got, tt.want)
		}
		var decoded Problem
		if err := json.Unmarshal(rec.Body.Bytes(), &decoded); err != nil {
			t.Fatal(err)
		}
		if rec.Code != decoded.Status {
			t.Errorf("status %d but body says %d", rec.Code, decoded.Status)
		}
	}
}

func TestWriteProblemUnencodableExtra(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteProblem(rec, Problem{Status: 400, Detail: "bad path", Extra: map[string]any{"path": "a/../b", "fn": func() {}}})
	if rec.Code != 400 {
		t.Fatalf("status %d", rec.Code)
	}
	want := `{"type":"about:blank","title":"Bad Request","status":400,"detail":"bad path"}`
	if got := strings.TrimSpace(rec.Body.String()); got != want {
		t.Fatalf("body %s, want %s", got, want)
	}
	if _, err := json.Marshal(Problem{Extra: map[string]any{"fn": func() {}}}); err == nil || !strings.Contains(err.Error(), `"fn"`) {
		t.Fatalf("Marshal error %v, want one naming the member", err)
	}
}

func TestProblemRoundTrip(t *testing.T) {
	want := Problem{
		Type: "about:blank", Title: "Conflict", Status: 409, Detail: "state",
		Extra: map[string]any{"uuid": "u", "count": float64(3), "nested": map[string]any{"a": true}},
	}
	encoded, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var got Problem
	if err := json.Unmarshal(encoded, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip %+v, want %+v", got, want)
	}
	if got.Error() != "state" {
		t.Fatalf("Error() = %q", got.Error())
	}
}

func TestProblemUnmarshalRejectsWrongTypes(t *testing.T) {
	for _, in := range []string{`{"status":"404"}`, `{"title":1}`, `[]`, `{"type":`} {
		var p Problem
		if err := json.Unmarshal([]byte(in), &p); err == nil {
			t.Errorf("Unmarshal(%s) = %+v, want an error", in, p)
		}
	}
}
