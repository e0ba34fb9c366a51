// Package buildapi holds the integration tests of image builds: the real
// engine (containers/storage on the local disk, RUN steps under runc)
// behind a loopback listener, driven over HTTP and with podman --remote.
package buildapi

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/containers/storage/pkg/reexec"

	"github.com/berth-project/berth/engine/internal/engine"
	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
	"github.com/berth-project/berth/engine/testimage"
)

func TestMain(m *testing.M) {
	if reexec.Init() {
		return
	}
	os.Exit(m.Run())
}

// testEngine is a running engine with its own store and one busybox image
// (localhost/busybox:latest).
type testEngine struct {
	t      testing.TB
	eng    *engine.Engine
	url    string
	root   string
	client *http.Client
}

func startEngine(t testing.TB) *testEngine {
	t.Helper()
	return startEngineLogging(t, slog.New(slog.DiscardHandler))
}

// startEngineLogging starts an engine that logs to logger.
func startEngineLogging(t testing.TB, logger *slog.Logger) *testEngine {
	t.Helper()
	testdeadline.Set(t, testdeadline.Default)
	enginetest.RequireRuntime(t, "build tests")
	root := t.TempDir()
	eng, err := engine.New(context.Background(), logger, engine.Config{
		Listen: "tcp://127.0.0.1:0", Root: root + "/root", RunRoot: root + "/run", Runtime: "runc",
	})
	if err != nil {
		t.Fatalf("starting engine: %v", err)
	}
	srv := httptest.NewServer(eng.Handler())
	te := &testEngine{t: t, eng: eng, url: srv.URL, root: root, client: srv.Client()}
	t.Cleanup(func() {
		srv.Close()
		eng.Close()
		enginetest.UnmountUnder(root, 3)
	})
	var buf bytes.Buffer
	if err := testimage.DockerArchive(&buf, testimage.Busybox("localhost/busybox:latest")); err != nil {
		t.Fatal(err)
	}
	resp := te.do(http.MethodPost, "/v4.3.1/libpod/images/load", "", &buf)
	if resp.status != http.StatusOK {
		t.Fatalf("loading busybox: %d %s", resp.status, resp.body)
	}
	return te
}

// tcpURL is the engine's address as podman --remote takes it.
func (e *testEngine) tcpURL() string { return "tcp://" + strings.TrimPrefix(e.url, "http://") }

type response struct {
	status int
	body   []byte
}

func (e *testEngine) do(method, path, contentType string, body io.Reader) response {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
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
	return response{status: resp.StatusCode, body: data}
}

// buildResult is a finished build stream.
type buildResult struct {
	status int
	body   []byte
	// output is the concatenated stream text, id the final image ID, err
	// the error line's message.
	output, id, err string
}

// build posts a context (files by path; a "->" prefix makes a symlink)
// with query and decodes the stream.
func (e *testEngine) build(files map[string]string, query url.Values) buildResult {
	e.t.Helper()
	return e.buildTar(contextTar(e.t, files), query)
}

func (e *testEngine) buildTar(tarball []byte, query url.Values) buildResult {
	e.t.Helper()
	r := e.do(http.MethodPost, "/v4.3.1/libpod/build?"+query.Encode(), "application/x-tar", bytes.NewReader(tarball))
	return decodeStream(e.t, r)
}

func decodeStream(t testing.TB, r response) buildResult {
	t.Helper()
	res := buildResult{status: r.status, body: r.body}
	if r.status != http.StatusOK {
		return res
	}
	var out strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			Stream string `json:"stream"`
			Error  string `json:"error"`
			Aux    *struct {
				ID string `json:"ID"`
			} `json:"aux"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("stream line %q: %v", sc.Bytes(), err)
		}
		out.WriteString(line.Stream)
		if line.Aux != nil {
			res.id = line.Aux.ID
		}
		if line.Error != "" {
			res.err = line.Error
		}
	}
	res.output = out.String()
	return res
}

// contextTar writes files into a tar stream.
func contextTar(t testing.TB, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, content := range files {
		hdr := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), ModTime: time.Unix(1700000000, 0), Typeflag: tar.TypeReg}
		if target, ok := strings.CutPrefix(content, "->"); ok {
			hdr = &tar.Header{Name: name, Linkname: target, Typeflag: tar.TypeSymlink, Mode: 0o777}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(content)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// inspect reads an image's inspect document.
func (e *testEngine) inspect(name string) imageInspect {
	e.t.Helper()
	r := e.do(http.MethodGet, "/v4.3.1/libpod/images/"+url.PathEscape(name)+"/json", "", nil)
	if r.status != http.StatusOK {
		e.t.Fatalf("inspect %s: %d %s", name, r.status, r.body)
	}
	var out imageInspect
	if err := json.Unmarshal(r.body, &out); err != nil {
		e.t.Fatal(err)
	}
	return out
}

type imageInspect struct {
	ID          string `json:"Id"`
	Annotations map[string]string
	Config      struct {
		Cmd          []string
		Entrypoint   []string
		Env          []string
		Labels       map[string]string
		User         string
		WorkingDir   string
		ExposedPorts map[string]any
		StopSignal   string
	}
	RootFS struct {
		Layers []string
	}
	History []struct {
		CreatedBy  string `json:"created_by"`
		EmptyLayer bool   `json:"empty_layer"`
	}
	Healthcheck *struct{ Test []string }
}

// exportLayers saves an image as a docker-archive and returns every file
// of it (layer tars included) as one byte slice, to search for content.
func (e *testEngine) exportAll(name string) []byte {
	e.t.Helper()
	r := e.do(http.MethodGet, "/v4.3.1/libpod/images/"+url.PathEscape(name)+"/get?format=docker-archive", "", nil)
	if r.status != http.StatusOK {
		e.t.Fatalf("export %s: %d %s", name, r.status, r.body)
	}
	return r.body
}

// mountsUnder lists mount points below dir.
func mountsUnder(dir string) []string {
	data, _ := os.ReadFile("/proc/self/mounts")
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && strings.HasPrefix(f[1], dir+"/") && !strings.HasSuffix(f[1], "/storage/overlay") {
			out = append(out, f[1])
		}
	}
	return out
}

// entries lists a directory's names (none when it does not exist).
func entries(dir string) []string {
	list, _ := os.ReadDir(dir)
	var out []string
	for _, e := range list {
		out = append(out, e.Name())
	}
	return out
}

// layerCount counts the store's layers.
func (e *testEngine) layerCount() int {
	e.t.Helper()
	layers, err := e.eng.Images().Storage().Layers()
	if err != nil {
		e.t.Fatal(err)
	}
	return len(layers)
}
