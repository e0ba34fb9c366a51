package auth

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadTokens(t *testing.T) {
	f := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(f, []byte("# comment\n\n  tok-a  \ntok-b\n"), 0o600)
	if toks, err := LoadTokens(f); err != nil || strings.Join(toks, ",") != "tok-a,tok-b" {
		t.Fatalf("LoadTokens = %v, %v", toks, err)
	}
	os.WriteFile(f, []byte("# only a comment\n"), 0o600)
	if _, err := LoadTokens(f); err == nil {
		t.Fatal("empty tokens file accepted")
	}
	if _, err := LoadTokens(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("missing tokens file accepted")
	}
}

func TestBearerAndTokens(t *testing.T) {
	ts := NewTokens([]string{"alpha", "beta-2"})
	if NewTokens(nil) != nil {
		t.Error("NewTokens(nil) is not nil")
	}
	for _, tc := range []struct {
		header string
		valid  bool
	}{
		{"Bearer alpha", true},
		{"bearer beta-2", true},
		{"BEARER   alpha  ", true},
		{"Bearer alph", false},
		{"Bearer alphaa", false},
		{"Bearer ", false},
		{"Basic alpha", false},
		{"alpha", false},
		{"", false},
	} {
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		if tc.header != "" {
			r.Header.Set("Authorization", tc.header)
		}
		token, ok := Bearer(r)
		if got := ok && ts.Valid(token); got != tc.valid {
			t.Errorf("%q: valid %v, want %v", tc.header, got, tc.valid)
		}
	}
}

// FuzzBearer: any Authorization header is parsed without panic, and only
// the configured token is accepted.
func FuzzBearer(f *testing.F) {
	f.Add("Bearer s3cret")
	f.Add("bearer  x ")
	f.Add("Basic dXNlcjpwYXNz")
	ts := NewTokens([]string{"s3cret"})
	f.Fuzz(func(t *testing.T, header string) {
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Authorization", header)
		token, ok := Bearer(r)
		if ok && ts.Valid(token) && token != "s3cret" {
			t.Fatalf("%q accepted as %q", header, token)
		}
	})
}
