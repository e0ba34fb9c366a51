package engineclient

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-project/berth/shared/testnet"
)

func newTestClient(t *testing.T, url string, mutate ...func(*Config)) *Client {
	t.Helper()
	cfg := Config{URL: url, Backoff: time.Millisecond, Timeout: 5 * time.Second, LoadTimeout: 5 * time.Second}
	for _, m := range mutate {
		m(&cfg)
	}
	client, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%q): %v", url, err)
	}
	t.Cleanup(client.Close)
	return client
}

func TestNewURLs(t *testing.T) {
	tests := []struct {
		url     string
		wantErr bool
		base    string
	}{
		{url: "tcp://127.0.0.1:8080", base: "http://127.0.0.1:8080"},
		{url: "http://127.0.0.1:8080", base: "http://127.0.0.1:8080"},
		{url: "https://engine.example:8443", base: "https://engine.example:8443"},
		{url: "unix:///run/berth/berth.sock", base: "http://d"},
		{url: "unix://", wantErr: true},
		{url: "tcp://", wantErr: true},
		{url: "ftp://127.0.0.1", wantErr: true},
		{url: "127.0.0.1:8080", wantErr: true},
		{url: "", wantErr: true},
		{url: "http://[::1", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			client, err := New(Config{URL: tt.url})
			if tt.wantErr {
				if err == nil {
					t.Fatalf("New(%q) succeeded, want an error", tt.url)
				}
				return
			}
			if err != nil {
				t.Fatalf("New(%q): %v", tt.url, err)
			}
			if got := client.base.String(); got != tt.base {
				t.Errorf("base = %q, want %q", got, tt.base)
			}
		})
	}
}

func TestPing(t *testing.T) {
	var gotPath, gotAgent string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotAgent = r.URL.Path, r.UserAgent()
		w.Header().Set("Api-Version", "1.41")
		w.Header().Set("Libpod-Api-Version", "4.3.1")
		_, _ = io.WriteString(w, "OK")
	}))
	defer srv.Close()

	info, err := newTestClient(t, srv.URL).Ping(context.Background())
	if err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if info.APIVersion != "1.41" || info.LibpodAPIVersion != "4.3.1" {
		t.Errorf("Ping info = %+v", info)
	}
	if gotPath != "/v4.0.0/libpod/_ping" {
		t.Errorf("path = %q, want /v4.0.0/libpod/_ping", gotPath)
	}
	if gotAgent != "berth-uploads" {
		t.Errorf("User-Agent = %q", gotAgent)
	}

	custom := newTestClient(t, "tcp://"+srv.Listener.Addr().String(), func(c *Config) { c.APIPrefix = "libpod/" })
	if _, err := custom.Ping(context.Background()); err != nil {
		t.Fatalf("Ping with custom prefix: %v", err)
	}
	if gotPath != "/libpod/_ping" {
		t.Errorf("path with prefix libpod/ = %q, want /libpod/_ping", gotPath)
	}
}

func TestUnixSocket(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "engine.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v4.0.0/libpod/_ping" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Libpod-Api-Version", "4.0.0")
		_, _ = io.WriteString(w, "OK")
	}))
	srv.Listener = ln
	srv.Start()
	defer srv.Close()

	info, err := newTestClient(t, "unix://"+socket).Ping(context.Background())
	if err != nil {
		t.Fatalf("Ping over unix socket: %v", err)
	}
	if info.LibpodAPIVersion != "4.0.0" {
		t.Errorf("LibpodAPIVersion = %q", info.LibpodAPIVersion)
	}
}

func TestLoadImageFile(t *testing.T) {
	archive := filepath.Join(t.TempDir(), "busybox.tar")
	content := bytes.Repeat([]byte("layer-bytes "), 10000)
	if err := os.WriteFile(archive, content, 0o600); err != nil {
		t.Fatal(err)
	}
	var got []byte
	var gotType, gotMethod, gotPath string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotMethod, gotPath, gotType = r.Method, r.URL.Path, r.Header.Get("Content-Type")
		got, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"Names":["localhost/busybox:latest","localhost/other:1"]}`)
	}))
	defer srv.Close()

	names, err := newTestClient(t, srv.URL).LoadImageFile(context.Background(), archive)
	if err != nil {
		t.Fatalf("LoadImageFile: %v", err)
	}
	if strings.Join(names, ",") != "localhost/busybox:latest,localhost/other:1" {
		t.Errorf("names = %v", names)
	}
	if gotMethod != http.MethodPost || gotPath != "/v4.0.0/libpod/images/load" || gotType != "application/x-tar" {
		t.Errorf("request = %s %s (%s)", gotMethod, gotPath, gotType)
	}
	if !bytes.Equal(got, content) {
		t.Errorf("engine received %d bytes, want the %d bytes of the archive", len(got), len(content))
	}

	if _, err := newTestClient(t, srv.URL).LoadImageFile(context.Background(), filepath.Join(t.TempDir(), "missing.tar")); err == nil || errors.Is(err, ErrUnavailable) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("load of a missing file: err = %v, want a not-exist error that is not ErrUnavailable", err)
	}
}

func TestErrorDecoding(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		body      string
		sentinel  error
		wantCause string
		wantMsg   string
	}{
		{
			name: "corrupt archive", status: 400,
			body:     `{"cause":"unexpected EOF","message":"loading image: unexpected EOF","response":400}`,
			sentinel: ErrBadRequest, wantCause: "unexpected EOF", wantMsg: "loading image: unexpected EOF",
		},
		{
			name: "no such image", status: 404,
			body:     `{"cause":"image not known","message":"busybox: image not known","response":404}`,
			sentinel: ErrNotFound, wantCause: "image not known", wantMsg: "busybox: image not known",
		},
		{
			name: "conflict", status: 409, body: `{"cause":"in use","message":"image is in use","response":409}`,
			sentinel: ErrConflict, wantCause: "in use", wantMsg: "image is in use",
		},
		{
			name: "server error with text body", status: 502, body: "bad gateway\n",
			sentinel: ErrServer, wantMsg: "bad gateway",
		},
		{
			name: "server error without body", status: 500, body: "",
			sentinel: ErrServer,
		},
		{
			name: "long text body is cut", status: 503, body: strings.Repeat("x", 2000),
			sentinel: ErrServer, wantMsg: strings.Repeat("x", 512) + "...",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				_, _ = io.Copy(io.Discard, r.Body)
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			}))
			defer srv.Close()

			_, err := newTestClient(t, srv.URL).LoadImageReader(context.Background(), strings.NewReader("not a tar"))
			var apiErr *Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("err = %v (%T), want *Error", err, err)
			}
			if apiErr.Status != tt.status || apiErr.Cause != tt.wantCause || apiErr.Message != tt.wantMsg {
				t.Errorf("error = %+v", apiErr)
			}
			if apiErr.Op != "POST /images/load" {
				t.Errorf("Op = %q", apiErr.Op)
			}
			if !errors.Is(err, tt.sentinel) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.sentinel)
			}
			for _, other := range []error{ErrBadRequest, ErrNotFound, ErrConflict, ErrServer, ErrUnavailable} {
				if other != tt.sentinel && errors.Is(err, other) {
					t.Errorf("errors.Is(%v, %v) = true", err, other)
				}
			}
			if n := calls.Load(); n != 1 {
				t.Errorf("an HTTP error response was sent %d times, want once (never retried)", n)
			}
		})
	}
}

// flakyServer drops the first `drops` connections after reading each request
// in full, then answers normally with answer.
func flakyServer(t *testing.T, drops int32, answer http.HandlerFunc) (srv *httptest.Server, requests *atomic.Int32, bodies chan []byte) {
	t.Helper()
	requests = &atomic.Int32{}
	bodies = make(chan []byte, 16)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := requests.Add(1)
		body, _ := io.ReadAll(r.Body)
		bodies <- body
		if n <= drops {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			conn.Close()
			return
		}
		answer(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, requests, bodies
}

func loadAnswer(w http.ResponseWriter, _ *http.Request) {
	_, _ = io.WriteString(w, `{"Names":["localhost/busybox:latest"]}`)
}

func TestLoadRetriesReopenFile(t *testing.T) {
	srv, requests, bodies := flakyServer(t, 2, loadAnswer)
	var opens atomic.Int32
	open := func() (io.ReadCloser, error) {
		opens.Add(1)
		return io.NopCloser(strings.NewReader("archive-bytes")), nil
	}
	names, err := newTestClient(t, srv.URL).LoadImage(context.Background(), open)
	if err != nil {
		t.Fatalf("LoadImage after two dropped connections: %v", err)
	}
	if len(names) != 1 || names[0] != "localhost/busybox:latest" {
		t.Errorf("names = %v", names)
	}
	if requests.Load() != 3 || opens.Load() != 3 {
		t.Errorf("requests = %d, opens = %d, want 3 and 3", requests.Load(), opens.Load())
	}
	for i := 0; i < 3; i++ {
		if body := <-bodies; string(body) != "archive-bytes" {
			t.Errorf("attempt %d sent %q, want the whole archive", i+1, body)
		}
	}
}

func TestLoadGivesUpAfterAttempts(t *testing.T) {
	srv, requests, _ := flakyServer(t, 100, loadAnswer)
	client := newTestClient(t, srv.URL, func(c *Config) { c.Attempts = 4 })
	_, err := client.LoadImage(context.Background(), func() (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader("x")), nil
	})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if requests.Load() != 4 {
		t.Errorf("requests = %d, want 4 attempts", requests.Load())
	}
}

func TestLoadReaderNotResentOnceRead(t *testing.T) {
	srv, requests, _ := flakyServer(t, 1, loadAnswer)
	_, err := newTestClient(t, srv.URL).LoadImageReader(context.Background(), strings.NewReader("streamed-archive"))
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if requests.Load() != 1 {
		t.Errorf("a consumed reader was sent %d times, want once", requests.Load())
	}
}

func TestConnectionRefused(t *testing.T) {
	addr := testnet.FreeAddr(t)

	client := newTestClient(t, "tcp://"+addr, func(c *Config) { c.Attempts = 3; c.Backoff = 20 * time.Millisecond })
	start := time.Now()
	_, err := client.Ping(context.Background())
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Ping of a closed port: err = %v, want ErrUnavailable", err)
	}
	// Two backoffs: 20ms then 40ms.
	if elapsed := time.Since(start); elapsed < 60*time.Millisecond {
		t.Errorf("gave up after %v, want retries with backoff (>= 60ms)", elapsed)
	}
	var apiErr *Error
	if errors.As(err, &apiErr) {
		t.Errorf("a connection failure decoded as an HTTP error: %v", apiErr)
	}

	// A reader that was never read from can be retried; it still fails here,
	// but all attempts are made.
	_, err = client.LoadImageReader(context.Background(), strings.NewReader("x"))
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("LoadImageReader to a closed port: err = %v", err)
	}
}

func TestTimeout(t *testing.T) {
	release := make(chan struct{})
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)

	client := newTestClient(t, srv.URL, func(c *Config) { c.Timeout = 100 * time.Millisecond })
	_, err := client.Ping(context.Background())
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrUnavailable and DeadlineExceeded", err)
	}
	if requests.Load() != 1 {
		t.Errorf("timed-out request tried %d times, want once", requests.Load())
	}
}

func TestImageExists(t *testing.T) {
	var gotPath string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath = r.URL.Path
		switch {
		case strings.Contains(r.URL.Path, "/busybox"):
			w.WriteHeader(http.StatusNoContent)
		case strings.Contains(r.URL.Path, "/broken"):
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"cause":"store","message":"store corrupt","response":500}`)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	client := newTestClient(t, srv.URL)
	ctx := context.Background()

	exists, err := client.ImageExists(ctx, "localhost/busybox:latest")
	if err != nil || !exists {
		t.Errorf("ImageExists(busybox) = %v, %v; want true", exists, err)
	}
	if gotPath != "/v4.0.0/libpod/images/localhost/busybox:latest/exists" {
		t.Errorf("path = %q", gotPath)
	}
	exists, err = client.ImageExists(ctx, "nosuch")
	if err != nil || exists {
		t.Errorf("ImageExists(nosuch) = %v, %v; want false, nil", exists, err)
	}
	if _, err = client.ImageExists(ctx, "broken"); !errors.Is(err, ErrServer) {
		t.Errorf("ImageExists(broken) err = %v, want ErrServer", err)
	}
}

func TestInspectImage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v4.0.0/libpod/images/localhost/busybox:latest/json" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"cause":"image not known","message":"image not known","response":404}`)
			return
		}
		_, _ = io.WriteString(w, `{"Id":"abc123","Digest":"sha256:def","RepoTags":["localhost/busybox:latest"],`+
			`"RepoDigests":["localhost/busybox@sha256:def"],"Created":"2024-01-02T03:04:05Z","Size":1234,`+
			`"Labels":{"a":"b"},"Config":{"Cmd":["sh"]}}`)
	}))
	defer srv.Close()
	client := newTestClient(t, srv.URL)

	image, err := client.InspectImage(context.Background(), "localhost/busybox:latest")
	if err != nil {
		t.Fatalf("InspectImage: %v", err)
	}
	want := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	if image.ID != "abc123" || image.Digest != "sha256:def" || len(image.RepoTags) != 1 ||
		image.RepoTags[0] != "localhost/busybox:latest" || image.Size != 1234 || !image.Created.Equal(want) ||
		image.Labels["a"] != "b" || len(image.RepoDigests) != 1 {
		t.Errorf("image = %+v", image)
	}
	_, err = client.InspectImage(context.Background(), "nosuch")
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("InspectImage(nosuch) err = %v, want ErrNotFound", err)
	}
}

func TestInvalidImageNames(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	client := newTestClient(t, srv.URL)
	for _, name := range []string{"", "../containers/x", "a//b", "busybox/.", "busy?box", "x#y", "a\x00b"} {
		if _, err := client.ImageExists(context.Background(), name); !errors.Is(err, ErrBadRequest) {
			t.Errorf("ImageExists(%q) err = %v, want ErrBadRequest", name, err)
		}
		if _, err := client.InspectImage(context.Background(), name); !errors.Is(err, ErrBadRequest) {
			t.Errorf("InspectImage(%q) err = %v, want ErrBadRequest", name, err)
		}
	}
	if requests.Load() != 0 {
		t.Errorf("%d requests reached the engine for invalid names", requests.Load())
	}
}

func TestBadSuccessBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `not json`)
	}))
	defer srv.Close()
	_, err := newTestClient(t, srv.URL).LoadImageReader(context.Background(), strings.NewReader("x"))
	if err == nil || errors.Is(err, ErrUnavailable) {
		t.Errorf("err = %v, want a decode error", err)
	}
}
