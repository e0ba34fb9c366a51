// Package devicesapi tests, end to end, what containers get besides an
// image: CDI devices from specs the tests write, a host directory as root
// filesystem (--rootfs), device cgroup rules and supplementary groups. An
// engine serves on a loopback listener, runs real runc containers, and the
// podman 4.3.1 client drives it.
package devicesapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// testEngine talks to an engine serving on a loopback listener.
type testEngine struct {
	t      testing.TB
	addr   string
	url    string
	dir    string // the test's temporary directory
	cdiDir string // the engine's extra CDI spec directory
	client *http.Client
}

// startEngine serves an engine that reads CDI specs from a directory of
// the test's (besides /etc/cdi and /var/run/cdi), with the busybox image
// loaded; its containers default to a private network namespace.
func startEngine(t testing.TB) *testEngine {
	t.Helper()
	if tt, ok := t.(*testing.T); ok {
		testdeadline.Set(tt, testdeadline.Default)
	}
	enginetest.RequireRuntime(t, "device tests")
	if _, err := exec.LookPath("podman"); err != nil {
		if os.Getenv("BERTH_TEST_STRICT") == "1" {
			t.Fatal("device tests need podman (BERTH_TEST_STRICT=1)")
		}
		t.Skip("device tests need podman")
	}
	dir := t.TempDir()
	cdiDir := filepath.Join(dir, "cdi")
	if err := os.Mkdir(cdiDir, 0o755); err != nil {
		t.Fatal(err)
	}
	nets := enginetest.UniqueNetworks(t)
	nets.DefaultMode = "private"
	addr, stop := enginetest.ServeConfig(t, engine.Config{
		Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, "run"), Runtime: "runc",
		Network: nets, CDISpecDirs: []string{cdiDir},
	})
	te := &testEngine{t: t, addr: addr, url: "http://" + addr + "/v4.3.1/libpod", dir: dir, cdiDir: cdiDir, client: &http.Client{}}
	t.Cleanup(func() {
		te.removeAll()
		stop()
		enginetest.UnmountUnder(dir, 3)
	})
	var buf bytes.Buffer
	img := testimage.Busybox("localhost/busybox:latest", "sh")
	img.Config.StopSignal = ""
	if err := testimage.DockerArchive(&buf, img); err != nil {
		t.Fatal(err)
	}
	te.must(http.StatusOK, "POST", "/images/load", &buf)
	return te
}

func (te *testEngine) do(method, path string, body any) (int, []byte) {
	te.t.Helper()
	return enginetest.Do(te.t, te.client, method, te.url, path, body)
}

func (te *testEngine) must(want int, method, path string, body any) []byte {
	te.t.Helper()
	return enginetest.Must(te.t, te.do, want, method, path, body)
}

// removeAll removes every pod, then every container.
func (te *testEngine) removeAll() {
	if status, body := te.do("GET", "/pods/json", nil); status == http.StatusOK {
		var pods []struct {
			ID string `json:"Id"`
		}
		json.Unmarshal(body, &pods)
		for _, p := range pods {
			te.do("DELETE", "/pods/"+p.ID+"?force=true&timeout=0", nil)
		}
	}
	enginetest.RemoveAll(te.do)
}

// podman runs the podman 4.3.1 client against the engine.
func (te *testEngine) podman(args ...string) (string, error) {
	te.t.Helper()
	cmd := exec.Command("podman", append([]string{"--remote", "--url", "tcp://" + te.addr}, args...)...)
	cmd.Dir = te.dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (te *testEngine) mustPodman(args ...string) string {
	te.t.Helper()
	out, err := te.podman(args...)
	if err != nil {
		te.t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// containerCount is how many containers the engine has (all states).
func (te *testEngine) containerCount() int {
	te.t.Helper()
	var list []json.RawMessage
	if err := json.Unmarshal(te.must(http.StatusOK, "GET", "/containers/json?all=true", nil), &list); err != nil {
		te.t.Fatal(err)
	}
	return len(list)
}

// writeSpec writes a CDI spec file into the engine's spec directory.
func (te *testEngine) writeSpec(name, content string) {
	te.t.Helper()
	if err := os.WriteFile(filepath.Join(te.cdiDir, name), []byte(content), 0o644); err != nil {
		te.t.Fatal(err)
	}
}
