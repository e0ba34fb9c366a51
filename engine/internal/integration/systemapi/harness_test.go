package systemapi

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"

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

// testEngine is an in-process engine on a loopback listener.
type testEngine struct {
	t       testing.TB
	base    string // http://ADDR
	root    string
	runRoot string
	client  *http.Client
	eng     *engine.Engine
	stop    func()
}

// startEngine starts an engine with its own state and removes everything
// it made when the test ends.
func startEngine(t *testing.T) *testEngine {
	t.Helper()
	testdeadline.Set(t, testdeadline.Default)
	return startBenchEngine(t)
}

// startBenchEngine starts an engine for a test or a benchmark.
func startBenchEngine(t testing.TB) *testEngine {
	t.Helper()
	enginetest.RequireRuntime(t, "system API tests")
	dir := t.TempDir()
	te := &testEngine{t: t, root: filepath.Join(dir, "root"), runRoot: filepath.Join(dir, "run"), client: &http.Client{}}
	eng, err := engine.New(context.Background(), nil, engine.Config{Root: te.root, RunRoot: te.runRoot, Runtime: "runc"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(eng.Handler())
	te.eng, te.base = eng, srv.URL
	te.stop = func() {
		srv.Close()
		eng.Close()
	}
	t.Cleanup(func() {
		enginetest.RemoveAll(te.do)
		te.stop()
		enginetest.UnmountUnder(dir, 3)
	})
	return te
}

// do sends a request under /v5.0.0/libpod (one value per filter).
func (te *testEngine) do(method, path string, body any) (int, []byte) {
	te.t.Helper()
	return enginetest.Do(te.t, te.client, method, te.base+"/v5.0.0/libpod", path, body)
}

// must sends a request and fails unless the status is want.
func (te *testEngine) must(want int, method, path string, body any) []byte {
	te.t.Helper()
	return enginetest.Must(te.t, te.do, want, method, path, body)
}

// decode unmarshals data into v or fails.
func (te *testEngine) decode(data []byte, v any) {
	te.t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		te.t.Fatalf("decoding %s: %v", data, err)
	}
}

// load loads images through ImagesLoad.
func (te *testEngine) load(images ...testimage.Image) {
	te.t.Helper()
	var buf bytes.Buffer
	if err := testimage.DockerArchive(&buf, images...); err != nil {
		te.t.Fatal(err)
	}
	te.must(http.StatusOK, "POST", "/images/load", &buf)
}

// create creates a container from spec and returns its ID.
func (te *testEngine) create(spec map[string]any) string {
	te.t.Helper()
	var out struct {
		ID string `json:"Id"`
	}
	te.decode(te.must(http.StatusCreated, "POST", "/containers/create", spec), &out)
	return out.ID
}

// filters encodes a filters query value.
func filters(f map[string][]string) string {
	data, _ := json.Marshal(f)
	return url.QueryEscape(string(data))
}

// imageWith is an image on the busybox base with one extra file of size bytes.
func imageWith(tags []string, file string, size int, labels map[string]string) testimage.Image {
	return testimage.Image{
		RepoTags: tags,
		Config:   testimage.Config{Cmd: []string{"sh"}, Labels: labels},
		Layers:   []testimage.Layer{{Files: []testimage.File{{Path: file, Data: bytes.Repeat([]byte("x"), size)}}}},
	}
}

// rootfsTar is a one-file root filesystem for imports.
func rootfsTar(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	data := []byte("imported\n")
	if err := tw.WriteHeader(&tar.Header{Name: "imported.txt", Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
