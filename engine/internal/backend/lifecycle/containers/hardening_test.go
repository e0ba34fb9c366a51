package containers_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/berth-project/berth/engine/internal/backend/lifecycle/containers"
)

// TestGeneratedNamesNeverCollide: creates without a name that run side by
// side never fail for a name, even when the generator's word lists allow a
// single name (before: "name is in use" for all but one of them).
func TestGeneratedNamesNeverCollide(t *testing.T) {
	te := startEngine(t)
	restore := containers.SetNameWords([]string{"solo"}, []string{"name"})
	defer restore()
	const n = 16
	var wg sync.WaitGroup
	results := make(chan string, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := te.Client.Post(te.URL+"/containers/create", "application/json", strings.NewReader(`{"image":"busybox","command":["true"]}`))
			if err != nil {
				results <- "error: " + err.Error()
				return
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusCreated {
				results <- fmt.Sprintf("status %d: %s", resp.StatusCode, body)
				return
			}
			var out struct{ ID string }
			json.Unmarshal(body, &out)
			results <- "id:" + out.ID
		}()
	}
	wg.Wait()
	close(results)
	names := map[string]bool{}
	for r := range results {
		id, ok := strings.CutPrefix(r, "id:")
		if !ok {
			t.Errorf("create without a name: %s", r)
			continue
		}
		name := te.inspect(id).Name
		if names[name] {
			t.Errorf("name %s given twice", name)
		}
		names[name] = true
	}
}

// TestCreateRefusesWhatStartCannotRun: values the kernel or runc would
// refuse at start are a 400 at create naming the field (before: created,
// then a 500 at start).
func TestCreateRefusesWhatStartCannotRun(t *testing.T) {
	te := startEngine(t)
	cases := []struct {
		name  string
		spec  map[string]any
		field string
	}{
		{"oom_score_adj out of range", map[string]any{"oom_score_adj": 5000}, "oom_score_adj"},
		{"oom_score_adj below range", map[string]any{"oom_score_adj": -1001}, "oom_score_adj"},
		{"host sysctl", map[string]any{"sysctl": map[string]string{"kernel.foo": "1"}}, "sysctl"},
		{"sysctl of the host's kernel", map[string]any{"sysctl": map[string]string{"kernel.panic": "1"}}, "sysctl"},
		{"missing net sysctl", map[string]any{"sysctl": map[string]string{"net.ipv4.berth_no_such": "1"}}, "sysctl"},
		{"net sysctl on the host network", map[string]any{"netns": map[string]string{"nsmode": "host"}, "sysctl": map[string]string{"net.ipv4.ip_forward": "1"}}, "sysctl"},
		{"netns path missing", map[string]any{"netns": map[string]string{"nsmode": "path", "value": "/nonexistent"}}, "netns"},
		{"netns path not a namespace", map[string]any{"netns": map[string]string{"nsmode": "path", "value": "/etc/hostname"}}, "netns"},
		{"netns path another namespace", map[string]any{"netns": map[string]string{"nsmode": "path", "value": "/proc/self/ns/uts"}}, "netns"},
		{"cpu shares 2^63", map[string]any{"resource_limits": map[string]any{"cpu": map[string]any{"shares": uint64(1) << 63}}}, "resource_limits.cpu.shares"},
		{"cpu quota huge", map[string]any{"resource_limits": map[string]any{"cpu": map[string]any{"quota": int64(1) << 62}}}, "resource_limits.cpu.quota"},
		{"cpuset beyond the host", map[string]any{"resource_limits": map[string]any{"cpu": map[string]any{"cpus": "0-4000"}}}, "resource_limits.cpu.cpus"},
		{"cpuset garbage", map[string]any{"resource_limits": map[string]any{"cpu": map[string]any{"cpus": "all"}}}, "resource_limits.cpu.cpus"},
		{"memory negative", map[string]any{"resource_limits": map[string]any{"memory": map[string]any{"limit": -5}}}, "resource_limits.memory.limit"},
		{"swappiness", map[string]any{"resource_limits": map[string]any{"memory": map[string]any{"swappiness": 200}}}, "resource_limits.memory.swappiness"},
		{"blkio weight", map[string]any{"resource_limits": map[string]any{"blockIO": map[string]any{"weight": 5}}}, "resource_limits.blockIO.weight"},
		{"cpu_quota", map[string]any{"cpu_quota": 5}, "cpu_quota"},
	}
	for _, tc := range cases {
		tc.spec["image"] = "busybox"
		tc.spec["command"] = []string{"true"}
		status, body := te.Do("POST", "/containers/create", tc.spec)
		if status != http.StatusBadRequest || !strings.Contains(string(body), "invalid "+tc.field+":") {
			t.Errorf("%s: %d %s, want 400 naming %s", tc.name, status, body, tc.field)
		}
	}
	// What the kernel takes still runs.
	code, _ := te.run(map[string]any{"command": []string{"true"}, "oom_score_adj": 1000,
		"sysctl":          map[string]string{"net.ipv4.ip_forward": "1", "kernel.shmmni": "4096"},
		"resource_limits": map[string]any{"cpu": map[string]any{"shares": 262144, "cpus": "0"}}})
	if code != 0 {
		t.Errorf("a container with valid values exited %d", code)
	}
}

// TestStartOfAVanishedNetNSIs400: a netns path that exists at create but is
// gone at start is the client's 400 naming netns, not a runtime 500.
func TestStartOfAVanishedNetNSIs400(t *testing.T) {
	te := startEngine(t)
	name := fmt.Sprintf("berth-hard-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("ip netns add: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	id := te.create(map[string]any{"command": []string{"true"}, "netns": map[string]string{"nsmode": "path", "value": "/run/netns/" + name}})
	if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns del: %v %s", err, out)
	}
	status, body := te.Do("POST", "/containers/"+id+"/start", nil)
	if status != http.StatusBadRequest || !bytes.Contains(body, []byte("invalid netns:")) {
		t.Errorf("start: %d %s, want 400 naming netns", status, body)
	}
	te.Must(http.StatusOK, "DELETE", "/containers/"+id+"?force=true", nil)
}
