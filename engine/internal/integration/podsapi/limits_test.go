package podsapi

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/testsupport/need"
)

// cgroupFile reads a control file of a cgroup v1 hierarchy.
func cgroupFile(t *testing.T, controller, rel, file string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", controller, rel, file))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// requireCgroupV1 skips where the hierarchies are not v1 (this machine's),
// whose files the test reads.
func requireCgroupV1(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/sys/fs/cgroup/memory/memory.limit_in_bytes"); err != nil {
		need.Skipf(t, "the pod limit test reads cgroup v1 files")
	}
}

// TestPodResourceLimits: podman pod create 4.3.1's resource flags put the
// limits on the pod's own cgroup (its files say so), members' cgroups nest
// under it, a member allocating beyond the pod's memory limit is OOM-killed
// while one within it runs, the pids limit stops forks, limits the kernel or
// the engine refuse are 400s naming the field, and pod rm leaves no cgroup.
func TestPodResourceLimits(t *testing.T) {
	te := startEngine(t)
	requireCgroupV1(t)
	te.MustPodman("pod", "create", "--name", "lim", "--memory", "32m", "--memory-swap", "32m",
		"--cpus", "0.5", "--cpu-shares", "512", "--cpuset-cpus", "0")
	pod := te.inspectPod("lim")
	if pod.CgroupPath == "" {
		t.Fatal("the pod has no cgroup")
	}
	for _, c := range []struct{ controller, file, want string }{
		{"memory", "memory.limit_in_bytes", "33554432"},
		{"memory", "memory.memsw.limit_in_bytes", "33554432"},
		{"cpu", "cpu.cfs_period_us", "100000"},
		{"cpu", "cpu.cfs_quota_us", "50000"},
		{"cpu", "cpu.shares", "512"},
		{"cpuset", "cpuset.cpus", "0"},
	} {
		if got := cgroupFile(t, c.controller, pod.CgroupPath, c.file); got != c.want {
			t.Errorf("%s of the pod's cgroup is %s, want %s", c.file, got, c.want)
		}
	}
	out := te.MustPodman("pod", "inspect", "lim", "--format", "{{.MemoryLimit}} {{.CPUQuota}} {{.CPUPeriod}} {{.CPUShares}} {{.CPUSetCPUs}}")
	if strings.TrimSpace(out) != "33554432 50000 100000 512 0" {
		t.Errorf("pod inspect limits: %s", out)
	}

	// Members live under the pod's cgroup, so its limits bind them.
	out = te.MustPodman("run", "--rm", "--pod", "lim", "localhost/busybox:latest", "cat", "/proc/self/cgroup")
	if !strings.Contains(out, ":memory:"+pod.CgroupPath+"/") || !strings.Contains(out, ":cpu:"+pod.CgroupPath+"/") {
		t.Fatalf("a member's cgroups are not under the pod's %s:\n%s", pod.CgroupPath, out)
	}
	te.MustPodman("run", "--rm", "--pod", "lim", "localhost/busybox:latest", "busybox", "dd", "if=/dev/zero", "of=/dev/null", "bs=8M", "count=1")
	hog := te.createIn("lim", "hog", "busybox", "dd", "if=/dev/zero", "of=/dev/null", "bs=64M", "count=1")
	te.Must(http.StatusNoContent, "POST", "/containers/"+hog+"/start", nil)
	if code := te.Wait(hog); code != 137 {
		t.Fatalf("a member allocating 64M in a 32M pod exited %d, want 137 (OOM-killed):\n%s", code, te.Logs(hog))
	}
	// The pod's usage rose to its limit and no further: the kernel killed
	// the member there.
	if peak, _ := strconv.Atoi(cgroupFile(t, "memory", pod.CgroupPath, "memory.max_usage_in_bytes")); peak > 32<<20 || peak < 31<<20 {
		t.Fatalf("the pod's peak memory is %d, want its limit (%d)", peak, 32<<20)
	}

	// The pids limit, which the API takes (podman 4.3.1's pod create has no flag for it).
	pidsID := te.CreatePod(map[string]any{"name": "few", "resource_limits": map[string]any{"pids": map[string]any{"limit": 12}}})
	few := te.inspectPod(pidsID)
	if got := cgroupFile(t, "pids", few.CgroupPath, "pids.max"); got != "12" {
		t.Fatalf("pids.max of the pod's cgroup is %s, want 12", got)
	}
	forks := te.createIn("few", "forks", "sh", "-c", "i=0; while [ $i -lt 20 ]; do busybox sleep 30 & i=$((i+1)); done; busybox pkill sleep")
	te.Must(http.StatusNoContent, "POST", "/containers/"+forks+"/start", nil)
	te.Wait(forks)
	if logs := te.Logs(forks); !strings.Contains(logs, "can't fork") {
		t.Fatalf("20 processes started in a pod limited to 12:\n%s", logs)
	}

	// Refused limits name their field and leave no cgroup.
	for _, c := range []struct {
		spec  map[string]any
		field string
	}{
		{map[string]any{"name": "io", "resource_limits": map[string]any{"blockIO": map[string]any{"weight": 300}}}, "resource_limits.blockIO"},
		{map[string]any{"name": "nocpu", "resource_limits": map[string]any{"cpu": map[string]any{"cpus": "4000"}}}, "resource_limits.cpu.cpus"},
		{map[string]any{"name": "tiny", "resource_limits": map[string]any{"memory": map[string]any{"limit": 4096}}}, "resource_limits.memory.limit"},
	} {
		status, body := te.Do("POST", "/pods/create", c.spec)
		var e struct{ Message string }
		json.Unmarshal(body, &e)
		if status != http.StatusBadRequest || !strings.Contains(e.Message, c.field) {
			t.Errorf("pod create %v: %d %s, want a 400 naming %s", c.spec, status, body, c.field)
		}
	}
	if status, _ := te.Do("GET", "/pods/nocpu/exists", nil); status != http.StatusNotFound {
		t.Fatalf("a refused pod exists (%d)", status)
	}

	te.MustPodman("pod", "rm", "-f", "lim")
	te.MustPodman("pod", "rm", "-f", "few")
	left, _ := filepath.Glob("/sys/fs/cgroup/*/berth/berth-pod-*")
	for _, p := range left {
		for _, id := range []string{pod.ID, few.ID} {
			if strings.HasSuffix(p, id) {
				t.Errorf("left behind after pod rm: %s", p)
			}
		}
	}
}
