package dockercli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDockerSecurityOpts: the docker CLI's --security-opt reaches the same
// confinement as podman's: the default seccomp filter, seccomp=unconfined,
// a profile file (which the CLI sends as text), no-new-privileges and
// systempaths=unconfined.
func TestDockerSecurityOpts(t *testing.T) {
	te := startEngine(t)
	status := func(args ...string) string {
		return te.run("docker", append(append([]string{"run", "--rm"}, args...), "localhost/busybox", "cat", "/proc/self/status")...)
	}
	contains(t, "default", status(), "Seccomp:\t2")
	contains(t, "seccomp=unconfined", status("--security-opt", "seccomp=unconfined"), "Seccomp:\t0")
	contains(t, "no-new-privileges", status("--security-opt", "no-new-privileges"), "NoNewPrivs:\t1")
	profile := filepath.Join(te.Dir, "nomkdir.json")
	os.WriteFile(profile, []byte(`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir","mkdirat"],"action":"SCMP_ACT_ERRNO"}]}`), 0o644)
	errOut := te.fails("docker", "run", "--rm", "--security-opt", "seccomp="+profile, "localhost/busybox", "mkdir", "/made")
	contains(t, "a profile file", errOut, "Operation not permitted")
	os.WriteFile(profile, []byte(`{"defaultAction":"SCMP_ACT_NOPE"}`), 0o644)
	errOut = te.fails("docker", "run", "--rm", "--security-opt", "seccomp="+profile, "localhost/busybox", "true")
	contains(t, "a bad profile", errOut, "defaultAction")
	out := te.run("docker", "run", "--rm", "--security-opt", "systempaths=unconfined", "localhost/busybox", "sh", "-c", "wc -c < /proc/timer_list")
	if strings.TrimSpace(out) == "0" {
		t.Errorf("systempaths=unconfined: /proc/timer_list still masked")
	}
}
