// Package podsapi tests the pods API end to end: an engine on a loopback
// listener running real runc containers, and the podman 4.3.1 client.
package podsapi

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
// runc, conmon, busybox-static or catatonit.
func requireRuntime(t testing.TB) {
	t.Helper()
	enginetest.RequireRuntime(t, "pod tests")
	if _, err := os.Stat("/usr/bin/catatonit"); err != nil {
		if os.Getenv("BERTH_TEST_STRICT") == "1" {
			t.Fatal("pod tests need catatonit (BERTH_TEST_STRICT=1)")
		}
		t.Skip("pod tests need catatonit")
	}
}

// startEngine serves an engine whose containers default to a private
// network namespace (loopback only).
func startEngine(t testing.TB) *testEngine {
	t.Helper()
	testdeadline.Set(t, testdeadline.Default)
	requireRuntime(t)
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	addr, stop := enginetest.Serve(t, root, filepath.Join(dir, "run"))
	return newTestEngine(t, dir, addr, stop)
}

// startBridgedEngine serves an engine with networks unique to the test,
// whose pods and containers default to the bridge network.
func startBridgedEngine(t testing.TB) *testEngine {
	t.Helper()
	testdeadline.Set(t, testdeadline.Default)
	requireRuntime(t)
	for _, p := range []string{"/usr/lib/podman/netavark", "/usr/lib/podman/aardvark-dns"} {
		if _, err := os.Stat(p); err != nil {
			if os.Getenv("BERTH_TEST_STRICT") == "1" {
				t.Fatalf("pod network tests need %s (BERTH_TEST_STRICT=1)", p)
			}
			t.Skipf("pod network tests need %s", p)
		}
	}
	dir := t.TempDir()
	addr, stop := enginetest.ServeConfig(t, engine.Config{
		Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, "run"), Runtime: "runc", Network: enginetest.UniqueNetworks(t),
	})
	return newTestEngine(t, dir, addr, stop)
}

func newTestEngine(t testing.TB, dir, addr string, stop func()) *testEngine {
	t.Helper()
	root := filepath.Join(dir, "root")
	te := &testEngine{t: t, addr: addr, url: "http://" + addr + "/v4.3.1/libpod", root: root, runRoot: filepath.Join(dir, "run"), client: &http.Client{}}
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

// removeAll removes every pod, then every container left.
func (te *testEngine) removeAll() {
	status, body := te.do("GET", "/pods/json", nil)
	if status == http.StatusOK {
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

// createPod creates a pod from spec and returns its ID.
func (te *testEngine) createPod(spec map[string]any) string {
	te.t.Helper()
	var out struct {
		ID string `json:"Id"`
	}
	if err := json.Unmarshal(te.must(http.StatusCreated, "POST", "/pods/create", spec), &out); err != nil {
		te.t.Fatal(err)
	}
	return out.ID
}

// createIn creates a busybox container in pod running cmd and returns its ID.
func (te *testEngine) createIn(pod, name string, cmd ...string) string {
	te.t.Helper()
	var out struct {
		ID string `json:"Id"`
	}
	spec := map[string]any{"image": "localhost/busybox:latest", "name": name, "command": cmd, "pod": pod}
	if err := json.Unmarshal(te.must(http.StatusCreated, "POST", "/containers/create", spec), &out); err != nil {
		te.t.Fatal(err)
	}
	return out.ID
}

// podInspect is the part of PodInspect the tests read.
type podInspect struct {
	ID               string
	Name             string
	State            string
	Hostname         string
	InfraContainerID string
	CgroupPath       string
	SharedNamespaces []string
	Containers       []struct {
		ID    string `json:"Id"`
		Name  string
		State string
	}
}

func (te *testEngine) inspectPod(name string) podInspect {
	te.t.Helper()
	var out podInspect
	if err := json.Unmarshal(te.must(http.StatusOK, "GET", "/pods/"+name+"/json", nil), &out); err != nil {
		te.t.Fatal(err)
	}
	return out
}

// waitPodState polls until the pod is in state want.
func (te *testEngine) waitPodState(name, want string) {
	te.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := te.inspectPod(name).State
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			te.t.Fatalf("pod %s is %s, want %s", name, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logs returns a container's output.
func (te *testEngine) logs(id string) string {
	te.t.Helper()
	data := te.must(http.StatusOK, "GET", "/containers/"+id+"/logs?stdout=true&stderr=true", nil)
	var out strings.Builder
	for len(data) >= 8 {
		n := int(data[4])<<24 | int(data[5])<<16 | int(data[6])<<8 | int(data[7])
		if 8+n > len(data) {
			break
		}
		out.Write(data[8 : 8+n])
		data = data[8+n:]
	}
	return out.String()
}

// wait waits for a container to exit and returns its exit code.
func (te *testEngine) wait(id string) int {
	te.t.Helper()
	var code int
	if err := json.Unmarshal(te.must(http.StatusOK, "POST", "/containers/"+id+"/wait", nil), &code); err != nil {
		te.t.Fatal(err)
	}
	return code
}

// leaks lists what remains of the given pods and containers on the host:
// cgroups, conmon processes, runc state, mounts.
func leaks(root, runRoot string, podIDs, ctrIDs []string) []string {
	var out []string
	cgroups, _ := filepath.Glob("/sys/fs/cgroup/*/berth")
	for _, hier := range cgroups {
		for _, id := range podIDs {
			if _, err := os.Stat(filepath.Join(hier, "berth-pod-"+id)); err == nil {
				out = append(out, "cgroup "+filepath.Join(hier, "berth-pod-"+id))
			}
		}
		for _, id := range ctrIDs {
			if _, err := os.Stat(filepath.Join(hier, "berth-"+id)); err == nil {
				out = append(out, "cgroup "+filepath.Join(hier, "berth-"+id))
			}
		}
	}
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
	for _, p := range procs {
		// A process still in a container's cgroup: one that outlived
		// its container (an infra container's pause process included).
		pid := filepath.Dir(p)
		cg, _ := os.ReadFile(filepath.Join(pid, "cgroup"))
		for _, id := range ctrIDs {
			if strings.Contains(string(cg), "/berth-"+id+"\n") {
				cmd, _ := os.ReadFile(p)
				out = append(out, "process "+pid+" in the cgroup of "+id+": "+strings.ReplaceAll(string(cmd), "\x00", " "))
			}
		}
	}
	for _, id := range ctrIDs {
		if _, err := os.Stat(filepath.Join(runRoot, "runc", id)); err == nil {
			out = append(out, "runc state "+id)
		}
		if _, err := os.Stat(filepath.Join(runRoot, "pause", id)); err == nil {
			out = append(out, "pause process state "+id)
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
