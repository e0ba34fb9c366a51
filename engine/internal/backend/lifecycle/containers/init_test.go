package containers_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/testsupport/need"
)

// TestInitRunsCatatonit: with init, catatonit (bind-mounted read-only at
// /run/podman-init) is PID 1 and runs the command as its child; inspect
// shows it; a bad init_path, or init_path without init, is a 400.
func TestInitRunsCatatonit(t *testing.T) {
	te := startEngine(t)
	need.All(t, "the init test", "/usr/bin/catatonit")
	code, out := te.run(map[string]any{"init": true, "command": []string{"sh", "-c", `tr '\0' ' ' < /proc/1/cmdline; echo; echo parent=$PPID; (echo x > /run/podman-init) 2>/dev/null || echo ro`}})
	all := strings.Join(out, "\n")
	if code != 0 || !strings.Contains(all, "/run/podman-init -- sh -c") || !strings.Contains(all, "parent=1") || !strings.Contains(all, "ro") {
		t.Fatalf("init: exit %d, output %q", code, out)
	}
	id := te.create(map[string]any{"init": true, "command": []string{"true"}})
	var d struct {
		Path       string
		Args       []string
		HostConfig struct{ Init bool }
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+id+"/json", nil), &d)
	if d.Path != "/run/podman-init" || len(d.Args) < 2 || d.Args[0] != "--" || d.Args[1] != "true" || !d.HostConfig.Init {
		t.Fatalf("inspect with init: %+v", d)
	}
	for _, spec := range []map[string]any{
		{"image": "busybox", "init": true, "init_path": "/nonexistent/catatonit"},
		{"image": "busybox", "init": true, "init_path": "relative/catatonit"},
		{"image": "busybox", "init_path": "/usr/bin/catatonit"},
	} {
		status, body := te.Do("POST", "/containers/create", spec)
		if status != http.StatusBadRequest || !strings.Contains(string(body), "init_path") {
			t.Errorf("%v: %d %s", spec, status, body)
		}
	}
}
