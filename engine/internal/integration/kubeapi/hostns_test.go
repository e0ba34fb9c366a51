package kubeapi

import (
	"net/http"
	"os"
	"strings"
	"testing"
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
	te := playWithPodman(t, hostNSYAML)
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

	te.expectRefused([]refusedPlay{
		{"spec.hostPID", strings.Replace(hostNSYAML, "  hostIPC: true\n", "  shareProcessNamespace: true\n", 1)},
		{"spec.hostUsers", strings.Replace(hostNSYAML, "  hostPID: true\n", "  hostUsers: false\n", 1)},
	}, http.StatusBadRequest)
}
