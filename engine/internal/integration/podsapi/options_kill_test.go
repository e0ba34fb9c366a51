package podsapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
)

// TestPodOptionsSurviveKill9: what a pod passes on to its members (restart
// policy, volumes, sysctls, confinement) is kept in the pod's record: after
// a kill -9 of the engine, a member created then still gets all of it.
func TestPodOptionsSurviveKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the engine binary")
	}
	p := enginetest.StartProcess(t, podOptions())
	te := &testEngine{p.Engine}
	te.CreatePod(map[string]any{"name": "kept", "restart_policy": "on-failure", "restart_tries": 1,
		"volumes": []map[string]any{{"Name": "kept-data", "Dest": "/data"}}, "sysctl": map[string]string{"kernel.msgmax": "9100"},
		"security_opt": []string{"no-new-privileges"}})
	te.Must(http.StatusOK, "POST", "/pods/kept/start", nil)

	p.Kill9()
	p.Start()

	id := te.Create(map[string]any{"name": "after", "pod": "kept", "command": []string{"sh", "-c", "cat /proc/sys/kernel/msgmax; grep NoNewPrivs /proc/self/status; mount | grep -c ' /data '"}})
	var c struct {
		HostConfig struct {
			RestartPolicy struct{ Name string }
		}
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+id+"/json", nil), &c)
	if c.HostConfig.RestartPolicy.Name != "on-failure" {
		t.Errorf("a member made after the kill: restart policy %q, want the pod's on-failure", c.HostConfig.RestartPolicy.Name)
	}
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	te.Wait(id)
	// The sysctl, no_new_privs, and one mount at /data (the pod's volume).
	if got, want := strings.Join(te.LogLines(id), "|"), "9100|NoNewPrivs:\t1|1"; got != want {
		t.Errorf("a member made after the kill printed %q, want %q", got, want)
	}
}
