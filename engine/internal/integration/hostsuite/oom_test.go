package hostsuite

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
)

// TestOOMKillIsRecorded: a container that outgrows its memory limit is
// killed by the kernel; the engine records it (exit code 137,
// State.OOMKilled, an oom event before died) from the container's cgroup.
// A container that exits by itself is not marked.
func TestOOMKillIsRecorded(t *testing.T) {
	l := startLab(t)
	// The shell doubles a string until the limit stops it.
	id := l.run(map[string]any{"name": "hog",
		"command":         []string{"sh", "-c", "x=0123456789abcdef; while true; do x=$x$x; done"},
		"resource_limits": map[string]any{"memory": map[string]any{"limit": 32 << 20, "swap": 32 << 20}},
	})
	if code := l.wait(id); code != 137 {
		t.Fatalf("exit code %d, want 137", code)
	}
	if d := l.inspect(id); !d.State.OOMKilled || d.State.ExitCode != 137 {
		t.Fatalf("inspect: OOMKilled %v, ExitCode %d", d.State.OOMKilled, d.State.ExitCode)
	}
	// Podman 4 clients cannot decode an "oom" status: read the events as
	// a newer client.
	base := strings.Replace(l.url, "/v4.3.1/", "/v5.0.0/", 1)
	// died follows oom a moment after the exit is recorded (and wait returns).
	var got string
	eventually(t, 10*time.Second, "oom then died in the events", func() bool {
		_, body := enginetest.Do(t, l.client, "GET", base, `/events?stream=false&filters={"container":["hog"]}`, nil)
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

	calm := l.run(map[string]any{"command": []string{"sh", "-c", "exit 3"},
		"resource_limits": map[string]any{"memory": map[string]any{"limit": 32 << 20}}})
	if code := l.wait(calm); code != 3 {
		t.Fatalf("calm exit code %d", code)
	}
	if d := l.inspect(calm); d.State.OOMKilled {
		t.Fatal("a container that exited by itself is marked OOMKilled")
	}
}
