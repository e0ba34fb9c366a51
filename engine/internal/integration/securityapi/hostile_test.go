package securityapi

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/testimage"
)

// hostileImage is busybox plus the hostile helper (testdata/hostile),
// built static for the test.
func hostileImage(t *testing.T) testimage.Image {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "hostile")
	cmd := exec.Command("go", "build", "-o", bin, "./testdata/hostile")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the hostile helper: %v\n%s", err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	img := testimage.Busybox("localhost/hostile:latest", "sh")
	img.Layers = []testimage.Layer{{Files: []testimage.File{{Path: "hostile", Mode: 0o755, Data: data}}}}
	return img
}

// attempts parses the helper's "name: refused: ..." / "name: ALLOWED" lines.
func attempts(out string) map[string]string {
	got := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if name, verdict, ok := strings.Cut(line, ": "); ok {
			got[name] = verdict
		}
	}
	return got
}

// TestHostileContainer: inside a default container, what an attacker would
// try is refused — a user namespace, mounting proc, the kernel keyring,
// loading a module, the sysrq trigger, /proc/kcore, ptrace of another
// container's process, raw and packet sockets, reboot. The same attempts
// with seccomp off or --privileged show the helper sees an allowed attempt.
func TestHostileContainer(t *testing.T) {
	te := startEngine(t)
	te.Load(busybox, hostileImage(t))
	te.MustPodman("run", "-d", "--name", "victim", "localhost/busybox", "sleep", "120")
	victimPID := strings.TrimSpace(te.MustPodman("inspect", "--format", "{{.State.Pid}}", "victim"))
	all := []string{"mount-proc", "keyctl", "init-module", "sysrq", "kcore", "ptrace=" + victimPID, "raw-socket", "packet-socket", "reboot"}

	out, err := te.Podman(append([]string{"run", "--rm", "localhost/hostile", "/hostile"}, all...)...)
	got := attempts(out)
	for _, a := range all {
		name, _, _ := strings.Cut(a, "=")
		if v := got[name]; !strings.HasPrefix(v, "refused") {
			t.Errorf("default container: %s %q, want refused", name, v)
		}
	}
	if err != nil {
		t.Errorf("default container: %v", err)
	}
	t.Logf("default container:\n%s", out)
	out, err = te.Podman("run", "--rm", "localhost/hostile", "busybox", "unshare", "-Ur", "true")
	if err == nil || !strings.Contains(out, "Operation not permitted") {
		t.Errorf("unshare -Ur in a default container: %v\n%s", err, out)
	}

	// Without the filter the keyring and user namespaces are reachable:
	// the filter, not chance, refused them above.
	out, _ = te.Podman(append([]string{"run", "--rm", "--security-opt", "seccomp=unconfined", "localhost/hostile", "/hostile"}, all...)...)
	if v := attempts(out)["keyctl"]; v != "ALLOWED" {
		t.Errorf("seccomp=unconfined: keyctl %q, want ALLOWED\n%s", v, out)
	}
	te.MustPodman("run", "--rm", "--security-opt", "seccomp=unconfined", "localhost/hostile", "busybox", "unshare", "-Ur", "true")
	// Capabilities refuse the rest: --privileged has them.
	out, _ = te.Podman(append([]string{"run", "--rm", "--privileged", "localhost/hostile", "/hostile"}, all...)...)
	got = attempts(out)
	for _, name := range []string{"mount-proc", "raw-socket", "reboot"} {
		if got[name] != "ALLOWED" {
			t.Errorf("--privileged: %s %q, want ALLOWED\n%s", name, got[name], out)
		}
	}
	// --cap-add NET_RAW gives raw sockets back, and only them.
	out, _ = te.Podman(append([]string{"run", "--rm", "--cap-add", "NET_RAW", "localhost/hostile", "/hostile"}, all...)...)
	got = attempts(out)
	if got["raw-socket"] != "ALLOWED" || got["mount-proc"] == "ALLOWED" || got["keyctl"] == "ALLOWED" {
		t.Errorf("--cap-add NET_RAW:\n%s", out)
	}
}
