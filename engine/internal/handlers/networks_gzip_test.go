package handlers

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"testing"
)

func TestAcceptsGzip(t *testing.T) {
	for _, tc := range []struct {
		header string
		want   bool
	}{
		{"", false},
		{"gzip", true},
		{"deflate, gzip", true},
		{"GZIP;q=0.5", true},
		{"gzip;q=0", false},
		{"gzip; q=0.0", false},
		{"identity", false},
		{"xgzip", false},
	} {
		r, _ := http.NewRequest("GET", "/", nil)
		r.Header.Set("Accept-Encoding", tc.header)
		if got := acceptsGzip(r); got != tc.want {
			t.Errorf("Accept-Encoding %q: %v, want %v", tc.header, got, tc.want)
		}
	}
}

// TestGzipMemo checks that a listing is compressed once while it is the same
// slice and again when it changes, and that it inflates to itself and a
// newline.
func TestGzipMemo(t *testing.T) {
	var g gzipMemo
	first := []byte(`[{"name":"a"}]`)
	gz := g.of(first)
	if again := g.of(first); &again[0] != &gz[0] {
		t.Fatal("the same listing was compressed again")
	}
	second := []byte(`[{"name":"b"}]`)
	for _, tc := range []struct{ in, gz []byte }{{first, gz}, {second, g.of(second)}} {
		zr, err := gzip.NewReader(bytes.NewReader(tc.gz))
		if err != nil {
			t.Fatal(err)
		}
		out, err := io.ReadAll(zr)
		if err != nil || string(out) != string(tc.in)+"\n" {
			t.Fatalf("inflated %q (%v), want %q and a newline", out, err, tc.in)
		}
	}
}
