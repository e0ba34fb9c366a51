package kubeapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// probePod is one pod of the probe test: its container c runs command with
// the probes given (YAML lines), under restartPolicy Always unless policy
// names another.
func probePod(name, policy, command, probes string) string {
	if policy != "" {
		policy = "  restartPolicy: " + policy + "\n"
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
%s  terminationGracePeriodSeconds: 0
  containers:
  - name: c
    image: localhost/busybox:latest
    command: %s
%s`, name, policy, command, probes)
}

var probesYAML = strings.Join([]string{
	probePod("bkprobe-live", "", `[sleep, "1000"]`,
		"    livenessProbe: {exec: {command: [test, -e, /tmp/alive]}, periodSeconds: 1, failureThreshold: 2, timeoutSeconds: 5}\n"),
	probePod("bkprobe-never", "Never", `[sleep, "1000"]`,
		"    livenessProbe: {exec: {command: [test, -e, /tmp/alive]}, periodSeconds: 1, failureThreshold: 2, timeoutSeconds: 5}\n"),
	probePod("bkprobe-start", "", `[sleep, "1000"]`,
		"    startupProbe: {exec: {command: [test, -e, /tmp/started]}, periodSeconds: 1, failureThreshold: 2, timeoutSeconds: 5}\n"),
	probePod("bkprobe-ok", "", `[sh, -c, "sleep 2; touch /tmp/started; exec sleep 1000"]`,
		"    startupProbe: {exec: {command: [test, -e, /tmp/started]}, periodSeconds: 1, failureThreshold: 20, timeoutSeconds: 5}\n"+
			"    livenessProbe: {exec: {command: [test, -e, /tmp/started]}, periodSeconds: 1, failureThreshold: 2, timeoutSeconds: 5}\n"),
}, "---\n")

// probeState is what the probe test reads of a container.
type probeState struct {
	State struct {
		Status    string
		StartedAt string
		Health    struct {
			Status string
			Log    []struct{ ExitCode int }
		}
	}
	Config struct {
		HealthcheckOnFailureAction string
		StartupHealthCheck         *struct {
			Test []string
		}
	}
}

// TestKubePlayProbes: played probes behave as the mapping says. A failing
// livenessProbe restarts its container in a pod restarting Always, and
// only marks it unhealthy under restartPolicy Never; a failing startupProbe
// restarts its container; one that passes hands over to the liveness
// probe, which keeps the container healthy and running.
func TestKubePlayProbes(t *testing.T) {
	te := startEngine(t)
	// The create members the mapping uses refuse what they cannot do.
	hc := map[string]any{"Test": []string{"CMD", "true"}}
	for _, bad := range []struct {
		spec   map[string]any
		member string
	}{
		{map[string]any{"health_check_on_failure_action": 1, "healthconfig": hc}, "health_check_on_failure_action"},
		{map[string]any{"health_check_on_failure_action": 9, "healthconfig": hc}, "health_check_on_failure_action"},
		{map[string]any{"startupHealthConfig": hc}, "startupHealthConfig"},
		{map[string]any{"startupHealthConfig": map[string]any{"Test": []string{"NONE"}}, "healthconfig": hc}, "startupHealthConfig"},
		{map[string]any{"startupHealthConfig": map[string]any{"Test": []string{"CMD", "true"}, "Successes": -1}, "healthconfig": hc}, "startupHealthConfig"},
	} {
		bad.spec["image"] = "localhost/busybox:latest"
		status, body := te.Do("POST", "/containers/create", bad.spec)
		if status != http.StatusBadRequest || !strings.Contains(string(body), bad.member) {
			t.Errorf("%v: %d %s, want a 400 naming %s", bad.spec, status, body, bad.member)
		}
	}
	te.play("", probesYAML)
	inspect := func(name string) probeState {
		var s probeState
		if err := json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+name+"/json", nil), &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	first := map[string]probeState{}
	for _, name := range []string{"bkprobe-live-c", "bkprobe-never-c", "bkprobe-start-c", "bkprobe-ok-c"} {
		first[name] = inspect(name)
	}
	if a := first["bkprobe-live-c"].Config.HealthcheckOnFailureAction; a != "restart" {
		t.Errorf("liveness probe under Always: on-failure action %q, want restart", a)
	}
	if a := first["bkprobe-never-c"].Config.HealthcheckOnFailureAction; a != "none" {
		t.Errorf("liveness probe under Never: on-failure action %q, want none", a)
	}
	if sh := first["bkprobe-start-c"].Config.StartupHealthCheck; sh == nil || len(sh.Test) != 4 {
		t.Errorf("startup probe: startup healthcheck %+v", sh)
	}

	restarted := map[string]bool{}
	var never, ok probeState
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		for _, name := range []string{"bkprobe-live-c", "bkprobe-start-c"} {
			if s := inspect(name); s.State.StartedAt != first[name].State.StartedAt {
				restarted[name] = true
			}
		}
		never, ok = inspect("bkprobe-never-c"), inspect("bkprobe-ok-c")
		if restarted["bkprobe-live-c"] && restarted["bkprobe-start-c"] && never.State.Health.Status == "unhealthy" &&
			ok.State.Health.Status == "healthy" && len(ok.State.Health.Log) >= 4 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, name := range []string{"bkprobe-live-c", "bkprobe-start-c"} {
		if !restarted[name] {
			t.Errorf("%s was not restarted by its failing probe", name)
		}
	}
	if never.State.Health.Status != "unhealthy" || never.State.Status != "running" || never.State.StartedAt != first["bkprobe-never-c"].State.StartedAt {
		t.Errorf("liveness probe under Never: %+v, want unhealthy and running, not restarted", never.State)
	}
	if ok.State.Health.Status != "healthy" || ok.State.Status != "running" || ok.State.StartedAt != first["bkprobe-ok-c"].State.StartedAt {
		t.Errorf("passing startup and liveness probes: %+v, want healthy, running, not restarted", ok.State)
	}
	if t.Failed() {
		t.Logf("restarted %v, never %+v, ok %+v", restarted, never.State, ok.State)
		for _, name := range []string{"bkprobe-live-c", "bkprobe-start-c"} {
			_, body := te.Do("GET", "/containers/"+name+"/json", nil)
			t.Logf("%s: %s", name, body)
		}
	}
	te.Must(http.StatusOK, "DELETE", "/kube/play", strings.NewReader(probesYAML))
}
