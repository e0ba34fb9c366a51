// Package buildapi holds the integration tests of image builds: the real
// engine (containers/storage on the local disk, RUN steps under runc)
// behind a loopback listener, driven over HTTP and with podman --remote.
package buildapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/tartest"
	"github.com/berth-project/berth/engine/testimage"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

// testEngine is a running engine with its own store and one busybox image
// (localhost/busybox:latest).
type testEngine struct{ *enginetest.Engine }

// buildOptions are the options of the build tests' engines: the busybox
// image without a command, logging to logger (nil discards the log).
func buildOptions(logger *slog.Logger) enginetest.Options {
	img := testimage.Busybox("localhost/busybox:latest")
	return enginetest.Options{What: "build tests", Bridged: true, Image: &img, Logger: logger}
}

func startEngine(t testing.TB) *testEngine {
	t.Helper()
	return startEngineLogging(t, nil)
}

// startEngineLogging starts an engine that logs to logger.
func startEngineLogging(t testing.TB, logger *slog.Logger) *testEngine {
	t.Helper()
	return &testEngine{enginetest.Start(t, buildOptions(logger))}
}

// tcpURL is the engine's address as podman --remote takes it.
func (e *testEngine) tcpURL() string { return "tcp://" + e.Addr }

type response struct {
	status int
	body   []byte
}

func (e *testEngine) do(method, path, contentType string, body io.Reader) response {
	e.T.Helper()
	status, _, data := e.Exchange(method, e.Base()+path, contentType, body)
	return response{status: status, body: data}
}

// buildResult is a finished build stream.
type buildResult struct {
	status int
	body   []byte
	// output is the concatenated stream text, id the final image ID, err
	// the error line's message.
	output, id, err string
}

// build posts a context (files by path; "-> TARGET" makes a symlink)
// with query and decodes the stream.
func (e *testEngine) build(files map[string]string, query url.Values) buildResult {
	e.T.Helper()
	return e.buildTar(tartest.Files(e.T, files), query)
}

func (e *testEngine) buildTar(tarball []byte, query url.Values) buildResult {
	e.T.Helper()
	r := e.do(http.MethodPost, "/v4.3.1/libpod/build?"+query.Encode(), "application/x-tar", bytes.NewReader(tarball))
	return decodeStream(e.T, r)
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

// inspect reads an image's inspect document.
func (e *testEngine) inspect(name string) imageInspect {
	e.T.Helper()
	r := e.do(http.MethodGet, "/v4.3.1/libpod/images/"+url.PathEscape(name)+"/json", "", nil)
	if r.status != http.StatusOK {
		e.T.Fatalf("inspect %s: %d %s", name, r.status, r.body)
	}
	var out imageInspect
	if err := json.Unmarshal(r.body, &out); err != nil {
		e.T.Fatal(err)
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
	e.T.Helper()
	r := e.do(http.MethodGet, "/v4.3.1/libpod/images/"+url.PathEscape(name)+"/get?format=docker-archive", "", nil)
	if r.status != http.StatusOK {
		e.T.Fatalf("export %s: %d %s", name, r.status, r.body)
	}
	return r.body
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
	e.T.Helper()
	layers, err := e.Eng.Images().Storage().Layers()
	if err != nil {
		e.T.Fatal(err)
	}
	return len(layers)
}
