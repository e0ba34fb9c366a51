package securityapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containers/storage/pkg/reexec"

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
	t      testing.TB
	addr   string
	base   string
	client *http.Client
	dir    string
}

// startEngine starts an engine with its own state (private networking) and
// removes everything it made when the test ends.
func startEngine(t testing.TB) *testEngine {
	t.Helper()
	testdeadline.Set(t, testdeadline.Default)
	enginetest.RequireRuntime(t, "security tests")
	requirePodman(t)
	dir := t.TempDir()
	// The engine's root must be reachable from inside a user namespace.
	os.Chmod(dir, 0o711)
	os.Chmod(filepath.Dir(dir), 0o711)
	addr, stop := enginetest.Serve(t, filepath.Join(dir, "root"), filepath.Join(dir, "run"))
	te := &testEngine{t: t, addr: addr, base: "http://" + addr, client: &http.Client{Timeout: time.Minute}, dir: dir}
	t.Cleanup(func() {
		enginetest.RemoveAll(te.do)
		stop()
		enginetest.UnmountUnder(dir, 3)
	})
	return te
}

func requirePodman(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("podman"); err != nil {
		if os.Getenv("BERTH_TEST_STRICT") == "1" {
			t.Fatal("podman is not installed (BERTH_TEST_STRICT=1)")
		}
		t.Skip("podman is not installed")
	}
}

// do sends a request under /v4.3.1/libpod.
func (te *testEngine) do(method, path string, body any) (int, []byte) {
	te.t.Helper()
	return enginetest.Do(te.t, te.client, method, te.base+"/v4.3.1/libpod", path, body)
}

func (te *testEngine) must(want int, method, path string, body any) []byte {
	te.t.Helper()
	return enginetest.Must(te.t, te.do, want, method, path, body)
}

// podman runs the podman 4.3.1 client against the engine.
func (te *testEngine) podman(args ...string) (string, error) {
	te.t.Helper()
	cmd := exec.Command("podman", append([]string{"--remote", "--url", "tcp://" + te.addr}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("podman %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func (te *testEngine) mustPodman(args ...string) string {
	te.t.Helper()
	out, err := te.podman(args...)
	if err != nil {
		te.t.Fatal(err)
	}
	return out
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

// inspect answers the container's inspect document as generic JSON.
func (te *testEngine) inspect(name string) map[string]any {
	te.t.Helper()
	var out map[string]any
	if err := json.Unmarshal(te.must(http.StatusOK, "GET", "/containers/"+name+"/json", nil), &out); err != nil {
		te.t.Fatal(err)
	}
	return out
}

// containerCount counts the engine's containers, infra ones included.
func (te *testEngine) containerCount() int {
	te.t.Helper()
	var list []any
	if err := json.Unmarshal(te.must(http.StatusOK, "GET", "/containers/json?all=true", nil), &list); err != nil {
		te.t.Fatal(err)
	}
	return len(list)
}

// busybox is the test image: busybox with its applets.
var busybox = testimage.Busybox("localhost/busybox:latest", "sh")

// writeFile writes a file under the test's directory and returns its path.
func (te *testEngine) writeFile(name, content string) string {
	te.t.Helper()
	p := filepath.Join(te.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		te.t.Fatal(err)
	}
	return p
}

// testImageWithLabel is the busybox image with labels.
func testImageWithLabel(tag string, labels map[string]string) testimage.Image {
	img := testimage.Busybox(tag, "sh")
	img.Config.Labels = labels
	return img
}
