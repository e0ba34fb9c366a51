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

// TestLocalPeer: loopback and Unix socket peers get the plain listing; any
// other address may get it compressed.
func TestLocalPeer(t *testing.T) {
	for _, tc := range []struct {
		remote string
		want   bool
	}{
		{"127.0.0.1:40000", true}, {"127.9.8.7:1", true}, {"[::1]:40000", true}, {"@", true}, {"", true},
		{"10.0.0.5:40000", false}, {"[2001:db8::1]:443", false}, {"192.168.1.2:80", false}, {"garbage", false},
	} {
		r, _ := http.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.remote
		if got := localPeer(r); got != tc.want {
			t.Errorf("RemoteAddr %q: local %v, want %v", tc.remote, got, tc.want)
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
