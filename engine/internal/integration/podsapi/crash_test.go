package podsapi

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
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
	if testing.Short() {
		t.Skip("builds and runs the engine binary")
	}
	// The pod is on the default bridge network, with names unique to the test.
	o := podOptions()
	o.Bridged = true
	p := enginetest.StartProcess(t, o)
	te, root, runRoot := &testEngine{p.Engine}, p.Root, p.RunRoot

	podID := te.CreatePod(map[string]any{"name": "steady", "shared_namespaces": []string{"net", "ipc", "uts", "pid"},
		"resource_limits": map[string]any{"memory": map[string]any{"limit": 64 << 20}, "pids": map[string]any{"limit": 100}}})
	long := te.createIn("steady", "long", "busybox", "sleep", "1000")
	short := te.createIn("steady", "short", "busybox", "sleep", "1.5")
	te.Must(http.StatusOK, "POST", "/pods/steady/start", nil)
	pod := te.inspectPod("steady")
	if pod.State != "Running" {
		t.Fatalf("pod before the kill: %s", pod.State)
	}

	// The default infra container runs as a pause process, which the
	// restarted engine must adopt.
	if _, err := os.Stat(filepath.Join(runRoot, "pause", pod.InfraContainerID, "state.json")); err != nil {
		t.Fatalf("the infra container is not a pause process: %v", err)
	}

	p.Kill9()
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
	p.Start()
	if l := enginetest.Leaks(root, runRoot, []string{halfID}, nil); len(l) > 0 {
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
	te.Must(http.StatusNoContent, "POST", "/containers/"+late+"/start", nil)
	if code := te.Wait(late); code != 0 || !strings.Contains(te.Logs(late), "sleep 1000") {
		t.Fatalf("a member created after the restart does not share the pod's PID namespace (exit %d):\n%s", code, te.Logs(late))
	}
	var report struct{ Errs []string }
	json.Unmarshal(te.Must(http.StatusOK, "POST", "/pods/steady/stop?timeout=0", nil), &report)
	if len(report.Errs) > 0 || te.inspectPod("steady").State != "Exited" {
		t.Fatalf("stop after restart: %+v, state %s", report, te.inspectPod("steady").State)
	}
	te.Must(http.StatusOK, "DELETE", "/pods/steady", nil)
	ids := []string{long, short, late, pod.InfraContainerID}
	deadline := time.Now().Add(5 * time.Second)
	for {
		l := enginetest.Leaks(root, runRoot, []string{podID}, ids)
		if len(l) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("left behind after pod rm:\n%s", strings.Join(l, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
