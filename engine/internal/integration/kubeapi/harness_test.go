// Package kubeapi tests kube play and kube down end to end: an engine on a
// loopback listener with real runc containers and netavark networks, the
// podman 4.3.1 client, and the HTTP routes.
package kubeapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
)

func TestMain(m *testing.M) {
	if reexec.Init() {
		return
	}
	os.Exit(m.Run())
}

// testEngine talks to an engine serving on a loopback listener.
type testEngine struct {
	t       testing.TB
	url     string
	addr    string
	root    string
	runRoot string
	client  *http.Client
}

// requireRuntime skips (or fails under BERTH_TEST_STRICT=1) without root,
// runc, conmon, busybox-static, catatonit or netavark.
func requireRuntime(t testing.TB) {
	t.Helper()
	enginetest.RequireRuntime(t, "kube play tests")
	for _, p := range []string{"/usr/bin/catatonit", "/usr/lib/podman/netavark", "/usr/lib/podman/aardvark-dns"} {
		if _, err := os.Stat(p); err != nil {
			if os.Getenv("BERTH_TEST_STRICT") == "1" {
				t.Fatalf("kube play tests need %s (BERTH_TEST_STRICT=1)", p)
			}
			t.Skipf("kube play tests need %s", p)
		}
	}
}

// startEngine serves an engine whose networks are unique to the test.
func startEngine(t testing.TB) *testEngine {
	t.Helper()
	testdeadline.Set(t, testdeadline.Default)
	requireRuntime(t)
	dir := t.TempDir()
	root, runRoot := filepath.Join(dir, "root"), filepath.Join(dir, "run")
	addr, stop := enginetest.ServeConfig(t, engine.Config{Root: root, RunRoot: runRoot, Runtime: "runc", Network: enginetest.UniqueNetworks(t)})
	te := &testEngine{t: t, addr: addr, url: "http://" + addr + "/v4.3.1/libpod", root: root, runRoot: runRoot, client: &http.Client{}}
	t.Cleanup(func() {
		te.removeAll()
		stop()
		enginetest.UnmountUnder(dir, 1)
	})
	te.loadBusybox()
	return te
}

func (te *testEngine) loadBusybox() {
	te.t.Helper()
	var buf bytes.Buffer
	img := testimage.Busybox("localhost/busybox:latest", "sh")
	img.Config.StopSignal = ""
	if err := testimage.DockerArchive(&buf, img); err != nil {
		te.t.Fatal(err)
	}
	te.must(http.StatusOK, "POST", "/images/load", &buf)
}

func (te *testEngine) do(method, path string, body any) (int, []byte) {
	te.t.Helper()
	return enginetest.Do(te.t, te.client, method, te.url, path, body)
}

func (te *testEngine) must(want int, method, path string, body any) []byte {
	te.t.Helper()
	return enginetest.Must(te.t, te.do, want, method, path, body)
}

// raw sends a body with a content type and returns the status and answer.
func (te *testEngine) raw(method, path, contentType string, body io.Reader) (int, []byte) {
	te.t.Helper()
	req, err := http.NewRequest(method, te.url+path, body)
	if err != nil {
		te.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := te.client.Do(req)
	if err != nil {
		te.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// removeAll removes every pod, then every container, volume and secret left.
func (te *testEngine) removeAll() {
	for _, p := range te.pods() {
		te.do("DELETE", "/pods/"+p.ID+"?force=true&timeout=0", nil)
	}
	enginetest.RemoveAll(te.do)
	te.do("DELETE", "/secrets/all", nil)
}

type podListEntry struct {
	ID     string `json:"Id"`
	Name   string
	Status string
}

func (te *testEngine) pods() []podListEntry {
	var pods []podListEntry
	status, body := te.do("GET", "/pods/json", nil)
	if status == http.StatusOK {
		json.Unmarshal(body, &pods)
	}
	return pods
}

// names lists the names of the objects a list route answers.
func (te *testEngine) names(path, field string) []string {
	te.t.Helper()
	var list []map[string]any
	if err := json.Unmarshal(te.must(http.StatusOK, "GET", path, nil), &list); err != nil {
		te.t.Fatal(err)
	}
	var out []string
	for _, e := range list {
		switch v := e[field].(type) {
		case string:
			out = append(out, v)
		case []any:
			for _, n := range v {
				out = append(out, fmt.Sprint(n))
			}
		case map[string]any:
			out = append(out, fmt.Sprint(v["Name"]))
		}
	}
	return out
}

// podman runs the podman 4.3.1 client against the engine, or skips
// (fails under BERTH_TEST_STRICT=1) when it is not installed.
func (te *testEngine) podman(args ...string) (string, error) {
	te.t.Helper()
	if _, err := exec.LookPath("podman"); err != nil {
		if os.Getenv("BERTH_TEST_STRICT") == "1" {
			te.t.Fatal("podman is not installed (BERTH_TEST_STRICT=1)")
		}
		te.t.Skip("podman is not installed")
	}
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

// writeFile writes a file into the test's directory and returns its path.
func writeFile(t testing.TB, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", what, detail)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// leaks lists what remains on the host of the given containers: conmon
// processes, runc state, mounts, network namespaces.
func leaks(root, runRoot string, ctrIDs []string) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, _ := os.ReadFile(p)
		cmd := strings.ReplaceAll(string(data), "\x00", " ")
		for _, id := range ctrIDs {
			if strings.Contains(cmd, id) && strings.Contains(cmd, "conmon") {
				out = append(out, "process "+p+": "+cmd)
			}
		}
	}
	for _, id := range ctrIDs {
		if _, err := os.Stat(filepath.Join(runRoot, "runc", id)); err == nil {
			out = append(out, "runc state "+id)
		}
		if _, err := os.Stat(filepath.Join(runRoot, "netns", "berth-"+id)); err == nil {
			out = append(out, "network namespace of "+id)
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mounts")
	for _, line := range strings.Split(string(mounts), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && (strings.HasPrefix(f[1], root+"/") || strings.HasPrefix(f[1], runRoot+"/")) {
			for _, id := range ctrIDs {
				if strings.Contains(f[1], id) {
					out = append(out, "mount "+f[1])
				}
			}
		}
	}
	return out
}

// httpGet fetches a URL on the loopback address with retries.
func httpGet(t testing.TB, url string) string {
	t.Helper()
	var body string
	eventually(t, 15*time.Second, "GET "+url, func() (bool, string) {
		resp, err := http.Get(url)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		body = string(data)
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return body
}
