package dockercli

import (
	"strings"
	"testing"
)

// TestDockerDefaultLimits: what dockerd gives a container that asks for
// no size: a 64 MiB /dev/shm, and with --memory as much swap again
// (memory+swap twice the limit), in the cgroup and in inspect.
func TestDockerDefaultLimits(t *testing.T) {
	te := startEngine(t)
	contains(t, "/dev/shm", te.run("docker", "run", "--rm", "localhost/busybox:latest", "grep", " /dev/shm ", "/proc/mounts"), "size=65536k")
	te.run("docker", "run", "-d", "--name", "lim", "--memory", "64m", "localhost/busybox:latest", "sleep", "300")
	contains(t, "inspect", te.run("docker", "inspect", "-f", "{{.HostConfig.MemorySwap}} {{.HostConfig.ShmSize}}", "lim"), "134217728 67108864")
	// cgroup v1 holds memory+swap, v2 the swap alone.
	swap := te.run("docker", "exec", "lim", "sh", "-c", "cat /sys/fs/cgroup/memory/memory.memsw.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.swap.max")
	if s := strings.TrimSpace(swap); s != "134217728" && s != "67108864" {
		t.Fatalf("the container's swap limit reads %q", s)
	}
}
