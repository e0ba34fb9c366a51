package securityapi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKubeSecurityRoundTrip: kube generate writes the confinement that was
// applied (seccompProfile Unconfined, hostUsers: false for containers with
// user namespaces of their own) and kube play applies it again.
func TestKubeSecurityRoundTrip(t *testing.T) {
	te := startEngine(t)
	te.load(busybox)
	te.mustPodman("create", "--name", "open", "--security-opt", "seccomp=unconfined", "localhost/busybox", "sleep", "60")
	yaml := te.mustPodman("generate", "kube", "open")
	if !strings.Contains(yaml, "seccompProfile:") || !strings.Contains(yaml, "type: Unconfined") {
		t.Fatalf("generate kube of an unconfined container:\n%s", yaml)
	}
	te.mustPodman("create", "--name", "mapped", "--userns=auto", "localhost/busybox", "true")
	if out := te.mustPodman("generate", "kube", "mapped"); !strings.Contains(out, "hostUsers: false") {
		t.Errorf("generate kube of a --userns=auto container:\n%s", out)
	}
	te.mustPodman("rm", "-f", "open")
	file := filepath.Join(te.dir, "open.yaml")
	os.WriteFile(file, []byte(yaml), 0o644)
	te.mustPodman("play", "kube", file)
	if got := te.inspect("open-pod-open")["SeccompProfilePath"]; got != "unconfined" {
		t.Errorf("played container: SeccompProfilePath %v, want unconfined", got)
	}
}
