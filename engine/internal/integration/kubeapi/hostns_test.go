package kubeapi

import (
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
)

const hostNSYAML = `apiVersion: v1
kind: Pod
metadata:
  name: bkh
spec:
  hostIPC: true
  hostPID: true
  containers:
  - name: c
    image: localhost/busybox:latest
    command: [sleep, "300"]
`

// TestKubePlayHostIPCAndPID: kube play of a pod with hostIPC and hostPID
// runs its containers in the host's IPC and PID namespaces, kube generate
// writes both back, and the combinations Kubernetes refuses
// (shareProcessNamespace with hostPID, a user namespace of the pod's own
// with either) are a 400 naming the field, with nothing created.
func TestKubePlayHostIPCAndPID(t *testing.T) {
	enginetest.RequirePodman(t)
	te := startEngine(t)
	te.play("", hostNSYAML)
	hostIPC, _ := os.Readlink("/proc/self/ns/ipc")
	hostPID, _ := os.Readlink("/proc/self/ns/pid")
	out := te.MustPodman("exec", "bkh-c", "sh", "-c", "readlink /proc/self/ns/ipc; readlink /proc/self/ns/pid")
	if strings.TrimSpace(out) != hostIPC+"\n"+hostPID {
		t.Fatalf("the container's namespaces:\n%s\nwant the host's %s and %s", out, hostIPC, hostPID)
	}
	gen := te.MustPodman("kube", "generate", "bkh")
	if !strings.Contains(gen, "hostIPC: true") || !strings.Contains(gen, "hostPID: true") {
		t.Fatalf("kube generate lost the host namespaces:\n%s", gen)
	}
	te.MustPodman("pod", "rm", "-f", "bkh")

	for field, yaml := range map[string]string{
		"spec.hostPID":   strings.Replace(hostNSYAML, "  hostIPC: true\n", "  shareProcessNamespace: true\n", 1),
		"spec.hostUsers": strings.Replace(hostNSYAML, "  hostPID: true\n", "  hostUsers: false\n", 1),
	} {
		status, body := te.Do("POST", "/kube/play", strings.NewReader(yaml))
		if status != http.StatusBadRequest || !strings.Contains(string(body), field) {
			t.Fatalf("play with %s in conflict: %d %s", field, status, body)
		}
	}
	if pods := te.pods(); len(pods) != 0 {
		t.Fatalf("pods left after the refused plays: %+v", pods)
	}
}
