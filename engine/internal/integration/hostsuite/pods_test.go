package hostsuite

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/need"
	"github.com/berth-project/berth/engine/internal/testsupport/poll"
)

// TestPodLimitsAndStats: a pod's limits land in the pod's own cgroup,
// which its members' cgroups live under; pod stats and pod top read the
// members' cgroups.
func TestPodLimitsAndStats(t *testing.T) {
	l := startLab(t)
	need.All(t, "host suite tests", "/usr/bin/catatonit")
	var pod struct {
		ID string `json:"Id"`
	}
	l.Decode(l.Must(http.StatusCreated, "POST", "/pods/create", map[string]any{"name": "limited",
		"resource_limits": map[string]any{"memory": map[string]any{"limit": 80 << 20}, "pids": map[string]any{"limit": 64}}}), &pod)
	member := l.Create(map[string]any{"name": "worker", "pod": "limited", "command": []string{"sh", "-c", "sleep 900 & sleep 901"}})
	l.Must(http.StatusOK, "POST", "/pods/limited/start", nil)
	var info struct{ CgroupPath string }
	l.Get("/pods/limited/json", &info)
	if info.CgroupPath == "" {
		t.Fatal("the pod has no cgroup")
	}
	if got := readCgroup(t, info.CgroupPath, "memory", "memory.limit_in_bytes", "memory.max"); got != strconv.Itoa(80<<20) {
		t.Errorf("pod memory limit %s", got)
	}
	if got := readCgroup(t, info.CgroupPath, "pids", "pids.max", "pids.max"); got != "64" {
		t.Errorf("pod pids limit %s", got)
	}
	if cg := l.inspect(member).State.CgroupPath; !strings.HasPrefix(cg, info.CgroupPath+"/") {
		t.Errorf("member cgroup %s is not under the pod's %s", cg, info.CgroupPath)
	}
	var st []struct {
		Name     string
		CPU      string
		MemUsage string
		PIDS     string
	}
	poll.Until(t, 10*time.Second, "pod stats for the member", func() bool {
		l.Get("/pods/stats?namesOrIDs=limited", &st)
		for _, s := range st {
			if s.Name == "worker" && s.PIDS == "2" && !strings.HasPrefix(s.MemUsage, "--") && !strings.HasPrefix(s.MemUsage, "0B") {
				return true
			}
		}
		return false
	})
	var top struct{ Processes [][]string }
	poll.Until(t, 10*time.Second, "both sleeps in pod top", func() bool {
		l.Get("/pods/limited/top?ps_args=args", &top)
		var sleeps int
		for _, p := range top.Processes {
			if strings.Contains(strings.Join(p, " "), "sleep 90") {
				sleeps++
			}
		}
		return sleeps == 2
	})
}
