package dockercli

import (
	"strings"
	"testing"
)

// TestDockerStopSignal: docker stop -s and docker restart -s send that
// signal in place of the container's stop signal (API 1.42); an unknown
// signal is a 400 naming it and stops nothing.
func TestDockerStopSignal(t *testing.T) {
	te := startEngine(t)
	script := `trap "echo got-usr1; exit 7" USR1; trap "exit 9" TERM; echo ready; while true; do sleep 0.1; done`
	te.run("docker", "run", "-d", "--name", "sig", "localhost/busybox:latest", "sh", "-c", script)
	contains(t, "bad signal", te.fails("docker", "stop", "-s", "NOPE", "sig"), "signal")
	contains(t, "still running", te.run("docker", "inspect", "-f", "{{.State.Running}}", "sig"), "true")
	te.run("docker", "stop", "-s", "SIGUSR1", "-t", "10", "sig")
	if code := strings.TrimSpace(te.run("docker", "inspect", "-f", "{{.State.ExitCode}}", "sig")); code != "7" {
		t.Fatalf("docker stop -s SIGUSR1: exit code %s, want 7 (the USR1 trap's)", code)
	}
	te.run("docker", "start", "sig")
	te.run("docker", "restart", "-s", "USR1", "-t", "10", "sig")
	if logs := te.run("docker", "logs", "sig"); strings.Count(logs, "got-usr1") != 2 {
		t.Fatalf("after a stop and a restart with USR1 the trap ran %d times, want 2:\n%s", strings.Count(logs, "got-usr1"), logs)
	}
	contains(t, "running again", te.run("docker", "inspect", "-f", "{{.State.Running}}", "sig"), "true")
}
