package imagesapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containers/storage/pkg/reexec"

	"github.com/berth-project/berth/engine/internal/engine"
	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
	"github.com/berth-project/berth/engine/testimage"
	"github.com/berth-project/berth/shared/apierror"
)

func TestMain(m *testing.M) {
	if reexec.Init() {
		return
	}
	code := m.Run()
	if engineBinary.path != "" {
		os.RemoveAll(filepath.Dir(engineBinary.path))
	}
	os.Exit(code)
}

// strict reports whether missing external components must fail the tests.
func strict() bool { return os.Getenv("BERTH_TEST_STRICT") == "1" }

// need skips (or, strict, fails) when a program is missing.
func need(t testing.TB, program string) string {
	t.Helper()
	path, err := exec.LookPath(program)
	if err != nil {
		if strict() {
			t.Fatalf("%s is required (BERTH_TEST_STRICT=1): %v", program, err)
		}
		t.Skipf("%s not installed", program)
	}
	return path
}

// testEngine is a running engine with its own store.
type testEngine struct {
	t      testing.TB
	eng    *engine.Engine
	srv    *httptest.Server
	url    string // http://127.0.0.1:PORT
	client *http.Client
}

// startEngine starts the real engine over a real listener on 127.0.0.1,
// its state in temporary directories on the local disk.
func startEngine(t testing.TB) *testEngine {
	t.Helper()
	testdeadline.Set(t, testdeadline.Default)
	need(t, "true")
	if _, err := os.Stat(testimage.BusyboxPath); err != nil {
		if strict() {
			t.Fatalf("busybox-static is required: %v", err)
		}
		t.Skip("busybox-static not installed")
	}
	root := t.TempDir()
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := engine.New(ctx, logger, engine.Config{
		Listen:  "tcp://127.0.0.1:0",
		Root:    root + "/root",
		RunRoot: root + "/run",
		Runtime: "runc",
		Network: enginetest.UniqueNetworks(t),
	})
	if err != nil {
		t.Fatalf("starting engine: %v", err)
	}
	srv := httptest.NewServer(eng.Handler())
	te := &testEngine{t: t, eng: eng, srv: srv, url: srv.URL, client: srv.Client()}
	t.Cleanup(func() {
		srv.Close()
		eng.Close()
	})
	return te
}

// tcpURL is the engine's address as podman --remote takes it.
func (e *testEngine) tcpURL() string { return "tcp://" + strings.TrimPrefix(e.url, "http://") }

// response is a finished request.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request to path (relative to the server) and reads the answer.
func (e *testEngine) do(method, path string, body io.Reader) response {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}

// json decodes the body into v, failing the test on error.
func (r response) json(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %q: %v", r.body, err)
	}
}

// expect fails the test unless the status is want.
func (r response) expect(t testing.TB, want int) response {
	t.Helper()
	if r.status != want {
		t.Fatalf("status %d, want %d; body %s", r.status, want, r.body)
	}
	return r
}

// engineError decodes an error body and checks its shape.
func (r response) engineError(t *testing.T, want int) apierror.EngineError {
	t.Helper()
	r.expect(t, want)
	var e apierror.EngineError
	r.json(t, &e)
	if e.Response != want || e.Message == "" || e.Cause == "" {
		t.Fatalf("error body %s does not carry status %d, message and cause", r.body, want)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("error content type %q", ct)
	}
	return e
}

// load loads images into the engine through ImagesLoad.
func (e *testEngine) load(images ...testimage.Image) []string {
	e.t.Helper()
	var buf bytes.Buffer
	if err := testimage.DockerArchive(&buf, images...); err != nil {
		e.t.Fatal(err)
	}
	r := e.do(http.MethodPost, "/v4.3.1/libpod/images/load", &buf).expect(e.t, http.StatusOK)
	var report struct{ Names []string }
	r.json(e.t, &report)
	return report.Names
}

// summary is the part of a listing row the tests look at.
type summary struct {
	ID          string `json:"Id"`
	ParentID    string `json:"ParentId"`
	RepoTags    []string
	RepoDigests []string
	Names       []string
	Labels      map[string]string
	Created     int64
	Size        int64
	Containers  int
	Dangling    bool
	Digest      string
}

// list lists images with the given query string.
func (e *testEngine) list(query string) []summary {
	e.t.Helper()
	var out []summary
	e.do(http.MethodGet, "/libpod/images/json"+query, nil).expect(e.t, http.StatusOK).json(e.t, &out)
	return out
}

// filtersQuery encodes filters as the filters parameter.
func filtersQuery(filters map[string][]string) string {
	data, _ := json.Marshal(filters)
	return "?filters=" + url.QueryEscape(string(data))
}

// tagsOf flattens the names of a listing, for comparisons.
func tagsOf(list []summary) []string {
	var out []string
	for _, s := range list {
		out = append(out, s.Names...)
	}
	return out
}

// contains reports whether list has s.
func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// withTimeout is a context for one external command.
func withTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
