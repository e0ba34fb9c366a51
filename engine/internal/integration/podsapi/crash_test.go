package podsapi

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
)

// TestPodsSurviveEngineKill kills the engine with SIGKILL while pods run
// (one member exits while no engine watches), starts it again, and checks
// that the pods and their containers are adopted with the right states,
// that a member created afterwards joins the old infra container's
// namespaces, that the pod's cgroup keeps its limits, that the cgroup of a
// pod whose creation the kill interrupted goes, and that pod stop and pod rm
// leave nothing behind (cgroups, conmon, runc state, the pause process and
// its state, mounts, the network
// namespace).
func TestPodsSurviveEngineKill(t *testing.T) {
	testdeadline.Set(t, testdeadline.Default)
	requireRuntime(t)
	if testing.Short() {
		t.Skip("builds and runs the engine binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "berth-engine")
	build := exec.Command("go", "build", "-o", bin, "github.com/berth-project/berth/engine/cmd/berth-engine")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build berth-engine: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	root, runRoot := filepath.Join(dir, "root"), filepath.Join(dir, "run")
	// The pod is on the default bridge network, with names unique to the test.
	nets := enginetest.UniqueNetworks(t)
	args := append([]string{"--listen", "tcp://" + addr, "--root", root, "--runroot", runRoot}, enginetest.NetworkFlags(nets)...)
	var cmd *exec.Cmd
	start := func() {
		cmd = exec.Command(bin, args...)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if resp, err := http.Get("http://" + addr + "/libpod/_ping"); err == nil {
				resp.Body.Close()
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("engine did not answer _ping")
			}
		}
	}
	kill9 := func() {
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
	}
	start()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
		}
		enginetest.UnmountUnder(dir, 3)
	})
	te := &testEngine{t: t, addr: addr, url: "http://" + addr + "/v4.3.1/libpod", root: root, client: &http.Client{}}
	t.Cleanup(te.removeAll)
	te.loadBusybox()

	podID := te.createPod(map[string]any{"name": "steady", "shared_namespaces": []string{"net", "ipc", "uts", "pid"},
		"resource_limits": map[string]any{"memory": map[string]any{"limit": 64 << 20}, "pids": map[string]any{"limit": 100}}})
	long := te.createIn("steady", "long", "busybox", "sleep", "1000")
	short := te.createIn("steady", "short", "busybox", "sleep", "1.5")
	te.must(http.StatusOK, "POST", "/pods/steady/start", nil)
	pod := te.inspectPod("steady")
	if pod.State != "Running" {
		t.Fatalf("pod before the kill: %s", pod.State)
	}

	// The default infra container runs as a pause process, which the
	// restarted engine must adopt.
	if _, err := os.Stat(filepath.Join(runRoot, "pause", pod.InfraContainerID, "state.json")); err != nil {
		t.Fatalf("the infra container is not a pause process: %v", err)
	}

	kill9()
	// A pod whose creation the kill interrupted: its cgroup exists, noted
	// in the run directory, and no record names it.
	halfID := strings.Repeat("0bad", 16)
	halfCgroup := "/berth/berth-pod-" + halfID
	for _, c := range []string{"memory", "pids"} {
		if err := os.MkdirAll(filepath.Join("/sys/fs/cgroup", c, halfCgroup), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(filepath.Join("/sys/fs/cgroup", c, halfCgroup)) })
	}
	os.MkdirAll(filepath.Join(runRoot, "pod-cgroups"), 0o700)
	if err := os.WriteFile(filepath.Join(runRoot, "pod-cgroups", halfID), []byte(halfCgroup), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // short exits while no engine watches
	start()
	if l := leaks(root, runRoot, []string{halfID}, nil); len(l) > 0 {
		t.Fatalf("the cgroup of a pod never recorded survived the restart:\n%s", strings.Join(l, "\n"))
	}
	if limit, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory", pod.CgroupPath, "memory.limit_in_bytes")); err != nil || strings.TrimSpace(string(limit)) != "67108864" {
		t.Fatalf("the pod's memory limit after the restart: %q %v", limit, err)
	}

	after := te.inspectPod("steady")
	states := map[string]string{}
	for _, c := range after.Containers {
		states[c.ID] = c.State
	}
	if after.State != "Degraded" || states[long] != "running" || states[short] != "exited" || states[pod.InfraContainerID] != "running" {
		t.Fatalf("pod after restart: %s %v", after.State, states)
	}
	late := te.createIn("steady", "late", "busybox", "sh", "-c", "busybox ps -o args")
	te.must(http.StatusNoContent, "POST", "/containers/"+late+"/start", nil)
	if code := te.wait(late); code != 0 || !strings.Contains(te.logs(late), "sleep 1000") {
		t.Fatalf("a member created after the restart does not share the pod's PID namespace (exit %d):\n%s", code, te.logs(late))
	}
	var report struct{ Errs []string }
	json.Unmarshal(te.must(http.StatusOK, "POST", "/pods/steady/stop?timeout=0", nil), &report)
	if len(report.Errs) > 0 || te.inspectPod("steady").State != "Exited" {
		t.Fatalf("stop after restart: %+v, state %s", report, te.inspectPod("steady").State)
	}
	te.must(http.StatusOK, "DELETE", "/pods/steady", nil)
	ids := []string{long, short, late, pod.InfraContainerID}
	deadline := time.Now().Add(5 * time.Second)
	for {
		l := leaks(root, runRoot, []string{podID}, ids)
		if _, err := os.Stat(filepath.Join(runRoot, "netns", "berth-"+pod.InfraContainerID)); !os.IsNotExist(err) {
			l = append(l, "network namespace of the infra container")
		}
		if len(l) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("left behind after pod rm:\n%s", strings.Join(l, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
