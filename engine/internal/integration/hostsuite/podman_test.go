package hostsuite

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/poll"
)

// TestPodmanClient drives the engine with podman 4.3.1's own client: run
// with a memory limit, stats, top, an OOM kill and its inspect, and a
// container's view of its cgroup namespace.
func TestPodmanClient(t *testing.T) {
	l := startLab(t)
	enginetest.RequirePodman(t)
	must := l.PodmanStdout
	must("run", "-d", "--name", "pm", "--memory", "64m", "localhost/busybox:latest", "sleep", "600")
	var stats []struct {
		Name     string `json:"name"`
		MemUsage string `json:"mem_usage"`
		PIDs     string `json:"pids"`
	}
	// Its one process: runc's init (several threads, each counted by the
	// pids controller) execs the command a moment after the start
	// answered, so the count is read until it settles.
	poll.Until(t, 10*time.Second, "podman stats of pm counting its one process", func() bool {
		out := must("stats", "--no-stream", "--format", "json", "pm")
		if err := json.Unmarshal([]byte(out), &stats); err != nil || len(stats) != 1 {
			t.Fatalf("podman stats: %v\n%s", err, out)
		}
		return stats[0].PIDs == "1"
	})
	if !strings.Contains(stats[0].MemUsage, "/ 67.11MB") {
		t.Fatalf("podman stats: %+v", stats[0])
	}
	if out := must("top", "pm", "pid", "args"); !strings.Contains(out, "sleep 600") {
		t.Fatalf("podman top:\n%s", out)
	}
	must("update", "--memory", "96m", "pm")
	if got := readCgroup(t, l.inspect("pm").State.CgroupPath, "memory", "memory.limit_in_bytes", "memory.max"); got != strconv.Itoa(96<<20) {
		t.Fatalf("memory limit after podman update: %s", got)
	}
	// A pod's CPU limit on the pod's cgroup (a slice under systemd), which
	// its member's cgroup lives under.
	must("pod", "create", "--name", "pmpod", "--cpus", "0.5")
	must("run", "-d", "--pod", "pmpod", "--name", "pmmember", "localhost/busybox:latest", "sleep", "600")
	var pod struct{ CgroupPath string }
	l.Get("/pods/pmpod/json", &pod)
	if unified() {
		if got := readCgroup(t, pod.CgroupPath, "cpu", "", "cpu.max"); got != "50000 100000" {
			t.Fatalf("cpu.max of pod cgroup %s after --cpus 0.5: %q", pod.CgroupPath, got)
		}
	}
	if cg := l.inspect("pmmember").State.CgroupPath; !strings.HasPrefix(cg, pod.CgroupPath+"/") {
		t.Fatalf("member cgroup %s is not under the pod's %s", cg, pod.CgroupPath)
	}
	// Its one process. runc's start returns once it has told the
	// container's init to go on; the init (a Go program, several threads,
	// each a task the pids controller counts) execs the command a moment
	// later: CI once read 5 there on a loaded host.
	poll.Until(t, 10*time.Second, "podman stats of the pod member counting its one process", func() bool {
		out := must("stats", "--no-stream", "--format", "{{.Name}} {{.PIDs}}", "pmmember")
		return strings.Contains(out, "pmmember 1")
	})
	must("run", "-d", "--name", "pmhog", "--memory", "32m", "--memory-swap", "32m", "localhost/busybox:latest",
		"sh", "-c", "x=0123456789abcdef; while true; do x=$x$x; done")
	if out := strings.TrimSpace(must("wait", "pmhog")); out != "137" {
		t.Fatalf("podman wait of a memory hog: %q", out)
	}
	if out := strings.TrimSpace(must("inspect", "--format", "{{.State.OOMKilled}}", "pmhog")); out != "true" {
		t.Fatalf("podman inspect OOMKilled: %q", out)
	}
	out := must("run", "--cgroupns", "private", "localhost/busybox:latest", "cat", "/proc/self/cgroup")
	if unified() && strings.TrimSpace(out) != "0::/" {
		t.Fatalf("/proc/self/cgroup with --cgroupns private: %q", out)
	}
}
