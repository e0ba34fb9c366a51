package dockercli

import (
	"strconv"
	"strings"
	"testing"
)

// TestDockerTopOnTheHost: docker top answers as dockerd's: ps(1) run on
// the host with the client's options ("-ef" by default), the lines of the
// container's processes with their host PIDs, and no line of the ps that
// listed them; options without a PID column, or naming another column
// PID, are refused. Before, the engine answered Podman's table (container
// PIDs) and ran ps inside the container for other options, listing that
// ps too.
func TestDockerTopOnTheHost(t *testing.T) {
	te := startEngine(t)
	te.run("docker", "run", "-d", "--name", "top", "localhost/busybox:latest", "sh", "-c", "sleep 100 & exec sleep 200")
	pid := strings.TrimSpace(te.run("docker", "inspect", "-f", "{{.State.Pid}}", "top"))
	out := te.run("docker", "top", "top")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if strings.Join(strings.Fields(lines[0]), " ") != "UID PID PPID C STIME TTY TIME CMD" || len(lines) != 3 {
		t.Fatalf("docker top:\n%s", out)
	}
	if f := strings.Fields(lines[1]); f[1] != pid || strings.Join(f[7:], " ") != "sleep 200" {
		t.Fatalf("the container's first process is %s, docker top lists:\n%s", pid, out)
	}
	if f := strings.Fields(lines[2]); f[2] != pid || strings.Join(f[7:], " ") != "sleep 100" {
		t.Fatalf("its child, host PPID %s:\n%s", pid, out)
	}
	custom := te.run("docker", "top", "top", "-o", "pid,comm")
	if strings.Contains(custom, " ps") || strings.Count(strings.TrimSpace(custom), "\n") != 2 {
		t.Fatalf("docker top -o pid,comm:\n%s", custom)
	}
	if n, err := strconv.Atoi(strings.Fields(strings.Split(custom, "\n")[1])[0]); err != nil || strconv.Itoa(n) != pid {
		t.Fatalf("docker top -o pid,comm lists host PID %s first:\n%s", pid, custom)
	}
	if msg := te.fails("docker", "top", "top", "-o", "comm"); !strings.Contains(msg, "Couldn't find PID field in ps output") {
		t.Fatalf("top without a PID column: %s", msg)
	}
	if msg := te.fails("docker", "top", "top", "-o", "user=PID"); !strings.Contains(msg, `specifying "user=PID" is not allowed`) {
		t.Fatalf("top naming another column PID: %s", msg)
	}
}
