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
	te.Load(busybox)
	te.MustPodman("create", "--name", "open", "--security-opt", "seccomp=unconfined", "localhost/busybox", "sleep", "60")
	yaml := te.MustPodman("generate", "kube", "open")
	if !strings.Contains(yaml, "seccompProfile:") || !strings.Contains(yaml, "type: Unconfined") {
		t.Fatalf("generate kube of an unconfined container:\n%s", yaml)
	}
	te.MustPodman("create", "--name", "mapped", "--userns=auto", "localhost/busybox", "true")
	if out := te.MustPodman("generate", "kube", "mapped"); !strings.Contains(out, "hostUsers: false") {
		t.Errorf("generate kube of a --userns=auto container:\n%s", out)
	}
	te.MustPodman("rm", "-f", "open")
	file := filepath.Join(te.Dir, "open.yaml")
	os.WriteFile(file, []byte(yaml), 0o644)
	te.MustPodman("play", "kube", file)
	if got := te.inspect("open-pod-open")["SeccompProfilePath"]; got != "unconfined" {
		t.Errorf("played container: SeccompProfilePath %v, want unconfined", got)
	}
}
