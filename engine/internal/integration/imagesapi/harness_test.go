package imagesapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/testimage"
	"github.com/berth-project/berth/shared/apierror"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

// testEngine is a running engine with its own store and no image, its
// requests' paths relative to the server (the API's version included).
type testEngine struct{ *enginetest.Engine }

// startEngine starts the real engine over a real listener on 127.0.0.1,
// its state in temporary directories on the local disk.
func startEngine(t testing.TB) *testEngine {
	t.Helper()
	return &testEngine{enginetest.Start(t, enginetest.Options{What: "image tests", Bridged: true, NoImage: true})}
}

// tcpURL is the engine's address as podman --remote takes it.
func (e *testEngine) tcpURL() string { return "tcp://" + e.Addr }

// response is a finished request.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request to path (relative to the server) and reads the answer.
func (e *testEngine) do(method, path string, body io.Reader) response {
	e.T.Helper()
	status, header, data := e.Exchange(method, e.Base()+path, "", body)
	return response{status: status, header: header, body: data}
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
	e.T.Helper()
	var buf bytes.Buffer
	if err := testimage.DockerArchive(&buf, images...); err != nil {
		e.T.Fatal(err)
	}
	r := e.do(http.MethodPost, "/v4.3.1/libpod/images/load", &buf).expect(e.T, http.StatusOK)
	var report struct{ Names []string }
	r.json(e.T, &report)
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

// answerOf sends a request without a body, wants a 200 and returns the
// answer decoded as a T.
func answerOf[T any](e *testEngine, method, path string) T {
	e.T.Helper()
	var v T
	e.do(method, path, nil).expect(e.T, http.StatusOK).json(e.T, &v)
	return v
}

// list lists images with the given query string.
func (e *testEngine) list(query string) []summary {
	e.T.Helper()
	return answerOf[[]summary](e, http.MethodGet, "/libpod/images/json"+query)
}

// pruneReport is one image in an image prune's answer.
type pruneReport struct {
	ID   string `json:"Id"`
	Size uint64
}

// prune prunes images with the given query string and returns the report.
func (e *testEngine) prune(query string) []pruneReport {
	e.T.Helper()
	return answerOf[[]pruneReport](e, http.MethodPost, "/libpod/images/prune"+query)
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
