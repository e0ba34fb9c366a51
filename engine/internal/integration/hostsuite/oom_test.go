package hostsuite

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/execution/cgroups"
	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/poll"
)

// TestOOMKillIsRecorded: a container that outgrows its memory limit is
// killed by the kernel; the engine records it (exit code 137,
// State.OOMKilled, an oom event before died) from the container's cgroup.
// A container that exits by itself is not marked. Four hogs die at once:
// under the systemd manager their scopes are gone before the exits are
// handled, and each kill must still be recorded (the kernel log's OOM
// summary, which the engine falls back on, names each one's cgroup).
func TestOOMKillIsRecorded(t *testing.T) {
	l := startLab(t)
	started := time.Now()
	// The shell doubles a string until the limit stops it.
	hog := func(name string) string {
		return l.Run(map[string]any{"name": name,
			"command":         []string{"sh", "-c", "x=0123456789abcdef; while true; do x=$x$x; done"},
			"resource_limits": map[string]any{"memory": map[string]any{"limit": 32 << 20, "swap": 32 << 20}},
		})
	}
	id := hog("hog")
	others := []string{hog("hog1"), hog("hog2"), hog("hog3")}
	for _, c := range append([]string{id}, others...) {
		if code := l.Wait(c); code != 137 {
			t.Fatalf("%s: exit code %d, want 137", c, code)
		}
		d := l.inspect(c)
		if !d.State.OOMKilled || d.State.ExitCode != 137 {
			t.Fatalf("%s: inspect: OOMKilled %v, ExitCode %d", c, d.State.OOMKilled, d.State.ExitCode)
		}
		if killed, ok := cgroups.OOMKillLogged(d.State.CgroupPath, started); !ok || !killed {
			t.Fatalf("%s: the kernel log's OOM summary for cgroup %s: found %v (log read: %v)", c, d.State.CgroupPath, killed, ok)
		}
	}
	// Podman 4 clients cannot decode an "oom" status: read the events as
	// a newer client.
	base := strings.Replace(l.URL, "/v4.3.1/", "/v5.0.0/", 1)
	// died follows oom a moment after the exit is recorded (and wait returns).
	var got string
	poll.Until(t, 10*time.Second, "oom then died in the events", func() bool {
		_, body := enginetest.Do(t, l.Client, "GET", base, `/events?stream=false&filters={"container":["hog"]}`, nil)
		var seq []string
		dec := json.NewDecoder(bytes.NewReader(body))
		for dec.More() {
			var m struct{ Action string }
			if err := dec.Decode(&m); err != nil {
				t.Fatalf("events %s: %v", body, err)
			}
			seq = append(seq, m.Action)
		}
		got = strings.Join(seq, " ")
		return strings.Contains(got, "oom died")
	})

	calm := l.Run(map[string]any{"command": []string{"sh", "-c", "exit 3"},
		"resource_limits": map[string]any{"memory": map[string]any{"limit": 32 << 20}}})
	if code := l.Wait(calm); code != 3 {
		t.Fatalf("calm exit code %d", code)
	}
	d := l.inspect(calm)
	if d.State.OOMKilled {
		t.Fatal("a container that exited by itself is marked OOMKilled")
	}
	if killed, _ := cgroups.OOMKillLogged(d.State.CgroupPath, started); killed {
		t.Fatalf("the kernel log names the calm container's cgroup %s", d.State.CgroupPath)
	}
}
