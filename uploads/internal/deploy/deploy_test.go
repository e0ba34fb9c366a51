package deploy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-project/berth/shared/testnet"
	"github.com/berth-project/berth/uploads/engineclient"
	"github.com/berth-project/berth/uploads/internal/processor"
)

func TestIsImageArchive(t *testing.T) {
	tests := map[string]bool{
		"busybox.tar":         true,
		"images/app.tar.gz":   true,
		"a/b/c.tgz":           true,
		"UPPER.TAR":           true,
		"Mixed.Tar.Gz":        true,
		"junk.txt":            false,
		"app.container":       false,
		"pod.yaml":            false,
		"archive.tar.bz2":     false,
		"archive.gz":          false,
		"tar":                 false,
		".tar":                false,
		"dir.tar/inside.json": false,
		"notes.tar.txt":       false,
	}
	for rel, want := range tests {
		if got := IsImageArchive(rel); got != want {
			t.Errorf("IsImageArchive(%q) = %v, want %v", rel, got, want)
		}
	}
}

// engineStub is an httptest engine: it records what it received and answers
// ImagesLoad with status and body.
type engineStub struct {
	srv      *httptest.Server
	requests atomic.Int32
	received atomic.Value // []byte
}

func newEngineStub(t *testing.T, status int, body string) *engineStub {
	t.Helper()
	stub := &engineStub{}
	stub.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v4.0.0/libpod/_ping":
			_, _ = io.WriteString(w, "OK")
		case "/v4.0.0/libpod/images/load":
			stub.requests.Add(1)
			data, _ := io.ReadAll(r.Body)
			stub.received.Store(data)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = io.WriteString(w, body)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(stub.srv.Close)
	return stub
}

func clientFor(t *testing.T, url string) *engineclient.Client {
	t.Helper()
	client, err := engineclient.New(engineclient.Config{URL: url, Backoff: time.Millisecond, Attempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return client
}

// writeUpload writes the files (slash path -> content) of an upload tree into a
// fresh directory and returns it with the paths in lexical order.
func writeUpload(t *testing.T, files map[string]string) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	var rels []string
	for rel, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		rels = append(rels, rel)
	}
	slices.Sort(rels)
	return dir, rels
}

// deployOne plans an upload holding only rel (with content) and deploys it.
func deployOne(t *testing.T, d *Deployer, rel string, content []byte) ([]string, error) {
	t.Helper()
	dir, files := writeUpload(t, map[string]string{rel: string(content)})
	p, err := d.Plan(dir, files)
	if err != nil {
		t.Fatal(err)
	}
	return p.Deploy(context.Background(), rel)
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestDeployLoadsImageArchive(t *testing.T) {
	stub := newEngineStub(t, http.StatusOK, `{"Names":["localhost/busybox:latest"]}`)
	var logged bytes.Buffer
	var gotRel string
	var gotNames []string
	deployer := New(clientFor(t, stub.srv.URL), slog.New(slog.NewJSONHandler(&logged, nil)),
		func(_ context.Context, rel string, names []string) { gotRel, gotNames = rel, names })

	content := []byte("pretend docker-archive bytes")
	names, err := deployOne(t, deployer, "images/busybox.tar.gz", content)
	if err != nil {
		t.Fatalf("Deploy: %v", err)
	}
	if len(names) != 1 || names[0] != "localhost/busybox:latest" {
		t.Errorf("Deploy returned names %v", names)
	}
	if got, _ := stub.received.Load().([]byte); !bytes.Equal(got, content) {
		t.Errorf("engine received %q, want the file's bytes", got)
	}
	if gotRel != "images/busybox.tar.gz" || len(gotNames) != 1 || gotNames[0] != "localhost/busybox:latest" {
		t.Errorf("onLoaded got %q %v", gotRel, gotNames)
	}
	if !strings.Contains(logged.String(), "localhost/busybox:latest") {
		t.Errorf("loaded image names not logged: %s", logged.String())
	}
}

func TestDeployUnsupportedNeedsNoEngine(t *testing.T) {
	// Nothing listens at this address: an unsupported file must not try it.
	deployer := New(clientFor(t, "tcp://127.0.0.1:1"), quietLogger(), nil)
	for _, rel := range []string{"junk.txt", "notes.md", "archive.tar.bz2"} {
		_, err := deployOne(t, deployer, rel, []byte("x"))
		if !errors.Is(err, processor.ErrUnsupported) || errors.Is(err, processor.ErrUnavailable) {
			t.Errorf("Deploy(%q) err = %v, want ErrUnsupported", rel, err)
		}
		if err.Error() != "unsupported file type" {
			t.Errorf("Deploy(%q) message = %q, want the plain error entry text", rel, err.Error())
		}
	}
}

func TestDeployCorruptArchiveIsFileError(t *testing.T) {
	for _, status := range []int{http.StatusBadRequest, http.StatusInternalServerError} {
		stub := newEngineStub(t, status, `{"cause":"unexpected EOF","message":"loading image: unexpected EOF","response":400}`)
		deployer := New(clientFor(t, stub.srv.URL), quietLogger(), func(context.Context, string, []string) {
			t.Errorf("onLoaded called for a refused archive")
		})
		_, err := deployOne(t, deployer, "bad.tar", []byte("not a tar"))
		if err == nil || errors.Is(err, processor.ErrUnavailable) || errors.Is(err, processor.ErrUnsupported) {
			t.Fatalf("status %d: err = %v, want a plain error entry", status, err)
		}
		if !strings.Contains(err.Error(), "loading image: unexpected EOF") {
			t.Errorf("status %d: message %q lacks the engine's message", status, err)
		}
		if n := stub.requests.Load(); n != 1 {
			t.Errorf("status %d: archive sent %d times, want once", status, n)
		}
	}
}

func TestDeployEngineDown(t *testing.T) {
	addr := testnet.FreeAddr(t)
	deployer := New(clientFor(t, "tcp://"+addr), quietLogger(), nil)

	for _, rel := range []string{"busybox.tar", "web.container", "pod.yaml"} {
		_, err := deployOne(t, deployer, rel, []byte("x"))
		if !errors.Is(err, processor.ErrUnavailable) {
			t.Fatalf("Deploy(%q) with the engine down: err = %v, want processor.ErrUnavailable", rel, err)
		}
	}
	if err := deployer.Ready(context.Background()); !errors.Is(err, engineclient.ErrUnavailable) {
		t.Errorf("Ready with the engine down = %v, want ErrUnavailable", err)
	}
}

func TestDeployMissingFile(t *testing.T) {
	stub := newEngineStub(t, http.StatusOK, `{"Names":["x"]}`)
	deployer := New(clientFor(t, stub.srv.URL), quietLogger(), nil)
	dir, files := writeUpload(t, map[string]string{"gone.tar": "x", "gone.container": "x", "gone.yaml": "x"})
	p, err := deployer.Plan(dir, files)
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range files {
		if err := os.Remove(filepath.Join(dir, rel)); err != nil {
			t.Fatal(err)
		}
		_, err = p.Deploy(context.Background(), rel)
		if err == nil || errors.Is(err, processor.ErrUnavailable) {
			t.Fatalf("Deploy(%q) err = %v, want a file error", rel, err)
		}
	}
	if stub.requests.Load() != 0 {
		t.Errorf("engine contacted for a missing file")
	}
}

func TestReady(t *testing.T) {
	stub := newEngineStub(t, http.StatusOK, `{}`)
	if err := New(clientFor(t, stub.srv.URL), quietLogger(), nil).Ready(context.Background()); err != nil {
		t.Errorf("Ready = %v", err)
	}
}
