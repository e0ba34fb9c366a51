package podsapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// TestPodSharesNamespaces runs a server and a client in one pod sharing
// net, ipc, uts and pid: the client reaches the server on 127.0.0.1, sees
// the pod's hostname, the infra container's IPC namespace and its process.
func TestPodSharesNamespaces(t *testing.T) {
	te := startEngine(t)
	podID := te.CreatePod(map[string]any{"name": "shared", "hostname": "podhost", "shared_namespaces": []string{"net", "ipc", "uts", "pid"}})
	web := te.createIn("shared", "web", "busybox", "httpd", "-f", "-p", "127.0.0.1:8080", "-h", "/etc")
	var report struct {
		Errs []string
		ID   string `json:"Id"`
	}
	json.Unmarshal(te.Must(http.StatusOK, "POST", "/pods/shared/start", nil), &report)
	if report.ID != podID || len(report.Errs) != 0 {
		t.Fatalf("start report: %+v", report)
	}
	te.Must(http.StatusNotModified, "POST", "/pods/shared/start", nil)
	pod := te.inspectPod("shared")
	if pod.State != "Running" || len(pod.Containers) != 2 || pod.InfraContainerID == "" {
		t.Fatalf("pod after start: %+v", pod)
	}
	var infra struct {
		State struct{ Pid int }
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+pod.InfraContainerID+"/json", nil), &infra)
	infraIPC, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/ipc", infra.State.Pid))
	if err != nil {
		t.Fatal(err)
	}
	// The infra container is a pause process: catatonit without conmon,
	// which attach and exec have nothing to join.
	if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", infra.State.Pid)); strings.TrimSpace(string(comm)) != "catatonit" {
		t.Fatalf("infra process is %q", comm)
	}
	te.Must(http.StatusConflict, "POST", "/containers/"+pod.InfraContainerID+"/attach?stream=true&stdout=true", nil)
	te.Must(http.StatusConflict, "POST", "/containers/"+pod.InfraContainerID+"/exec", map[string]any{"Cmd": []string{"/catatonit", "--version"}})

	client := te.createIn("shared", "client", "sh", "-c",
		"busybox hostname; for i in 1 2 3 4 5 6 7 8 9 10; do busybox wget -q -O - http://127.0.0.1:8080/hostname && break; busybox sleep 0.2; done; busybox readlink /proc/self/ns/ipc; busybox ps -o args")
	te.Must(http.StatusNoContent, "POST", "/containers/"+client+"/start", nil)
	if code := te.Wait(client); code != 0 {
		t.Fatalf("client exited %d: %s", code, te.Logs(client))
	}
	out := te.Logs(client)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 3 || lines[0] != "podhost" || lines[1] != "podhost" || lines[2] != infraIPC {
		t.Fatalf("client output (want hostname, fetched /etc/hostname, ipc %s, ps):\n%s", infraIPC, out)
	}
	if !strings.Contains(out, "catatonit -P") || !strings.Contains(out, "busybox httpd -f") {
		t.Fatalf("client does not see the pod's processes:\n%s", out)
	}
	te.wantPodState("shared", "Degraded", "with an exited member")

	te.Must(http.StatusOK, "POST", "/pods/shared/stop?timeout=0", nil)
	te.wantPodState("shared", "Exited", "after stop")
	te.Must(http.StatusNotModified, "POST", "/pods/shared/stop", nil)
	te.Must(http.StatusOK, "DELETE", "/pods/shared", nil)
	te.Must(http.StatusNotFound, "GET", "/pods/shared/json", nil)
	for _, id := range []string{web, client, pod.InfraContainerID} {
		te.Must(http.StatusNotFound, "GET", "/containers/"+id+"/json", nil)
	}
	if l := te.Leaks([]string{podID}, []string{web, client, pod.InfraContainerID}); len(l) > 0 {
		t.Fatalf("left behind:\n%s", strings.Join(l, "\n"))
	}
}

// TestPodLifecycleReports checks the per-container errors of the
// lifecycle reports, the derived states and the removal rules.
func TestPodLifecycleReports(t *testing.T) {
	te := startEngine(t)
	te.CreatePod(map[string]any{"name": "life"})
	good := te.createIn("life", "good", "busybox", "sleep", "1000")
	bad := te.createIn("life", "bad", "/nonexistent")
	var report struct {
		Errs []string
		ID   string `json:"Id"`
	}
	json.Unmarshal(te.Must(http.StatusConflict, "POST", "/pods/life/start", nil), &report)
	if len(report.Errs) != 1 || !strings.Contains(report.Errs[0], bad) {
		t.Fatalf("start report: %+v", report)
	}
	pod := te.inspectPod("life")
	if pod.State != "Degraded" {
		t.Fatalf("pod with a failed member is %s", pod.State)
	}
	// Removal rules: the infra container never alone, a running member
	// not without force, the pod not without force.
	te.Must(http.StatusConflict, "DELETE", "/containers/"+pod.InfraContainerID+"?force=true", nil)
	te.Must(http.StatusConflict, "DELETE", "/containers/"+good, nil)
	te.Must(http.StatusConflict, "DELETE", "/pods/life", nil)
	te.Must(http.StatusBadRequest, "POST", "/pods/life/kill?signal=NOTASIGNAL", nil)

	te.Must(http.StatusOK, "POST", "/pods/life/pause", nil)
	// infra and good paused, bad never started: Podman calls that Created.
	te.wantPodState("life", "Created", "paused")
	te.Must(http.StatusConflict, "POST", "/pods/life/kill", nil)
	te.Must(http.StatusOK, "POST", "/pods/life/unpause", nil)
	te.Must(http.StatusOK, "POST", "/pods/life/kill?signal=KILL", nil)
	te.waitPodState("life", "Stopped")
	te.Must(http.StatusOK, "DELETE", "/containers/"+bad, nil)
	te.waitPodState("life", "Exited")
	json.Unmarshal(te.Must(http.StatusOK, "POST", "/pods/life/restart?timeout=0", nil), &report)
	if len(report.Errs) != 0 || te.inspectPod("life").State != "Running" {
		t.Fatalf("restart: %+v, state %s", report, te.inspectPod("life").State)
	}
	var top struct {
		Titles    []string
		Processes [][]string
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/pods/life/top", nil), &top)
	if len(top.Processes) != 2 || len(top.Titles) == 0 {
		t.Fatalf("top: %+v", top)
	}
	var st []map[string]string
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/pods/stats?namesOrIDs=life", nil), &st)
	if len(st) != 2 || st[0]["Pod"] != pod.ID[:12] || !strings.HasSuffix(st[0]["CPU"], "%") {
		t.Fatalf("stats: %+v", st)
	}
	// stream=true: one array every delay seconds until the client goes.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", te.URL+"/pods/stats?namesOrIDs=life&stream=true&delay=1", nil)
	resp, err := te.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	dec := json.NewDecoder(resp.Body)
	for i := 0; i < 3; i++ {
		var sample []map[string]string
		if err := dec.Decode(&sample); err != nil || len(sample) != 2 || sample[1]["Pod"] != pod.ID[:12] {
			t.Fatalf("streamed sample %d: %+v, %v", i, sample, err)
		}
	}
	if took := time.Since(began); took < 1500*time.Millisecond {
		t.Fatalf("3 samples 1 s apart came in %v", took)
	}
	cancel()
	resp.Body.Close()
	te.Must(http.StatusOK, "DELETE", "/pods/life?force=true&timeout=0", nil)
	if l := te.Leaks([]string{pod.ID}, []string{good, bad, pod.InfraContainerID}); len(l) > 0 {
		t.Fatalf("left behind:\n%s", strings.Join(l, "\n"))
	}
}

// TestPodExitPolicyStop: with exit policy stop the pod stops when its last
// member exits; with continue the infra container keeps running.
func TestPodExitPolicyStop(t *testing.T) {
	te := startEngine(t)
	te.CreatePod(map[string]any{"name": "stopper", "exit_policy": "stop"})
	te.CreatePod(map[string]any{"name": "keeper"})
	for _, p := range []string{"stopper", "keeper"} {
		te.createIn(p, p+"-job", "busybox", "sleep", "0.3")
		te.Must(http.StatusOK, "POST", "/pods/"+p+"/start", nil)
	}
	te.waitPodState("stopper", "Exited")
	te.waitPodState("keeper", "Degraded")
}

// TestPodExitPolicyStopSparesRestarts: a member that a restart stops and
// starts again, or that its restart policy brings back, has not exited for
// good, so exit policy stop leaves the infra container running (it used to
// stop it between the stop and the start, and the start then failed on the
// infra's namespaces, which are gone).
func TestPodExitPolicyStopSparesRestarts(t *testing.T) {
	te := startEngine(t)
	te.CreatePod(map[string]any{"name": "restarter", "exit_policy": "stop"})
	srv := te.createIn("restarter", "restarter-srv", "sleep", "1000")
	te.Must(http.StatusOK, "POST", "/pods/restarter/start", nil)
	infra := te.inspectPod("restarter").InfraContainerID
	infraStarted := func() string {
		var c struct {
			State struct{ Status, StartedAt string }
		}
		json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+infra+"/json", nil), &c)
		if c.State.Status != "running" {
			t.Fatalf("the infra container is %s", c.State.Status)
		}
		return c.State.StartedAt
	}
	first := infraStarted()
	for i := 0; i < 6; i++ {
		te.Must(http.StatusNoContent, "POST", "/containers/"+srv+"/restart?t=0", nil)
	}
	var spec struct {
		ID string `json:"Id"`
	}
	json.Unmarshal(te.Must(http.StatusCreated, "POST", "/containers/create", map[string]any{
		"image": "localhost/busybox:latest", "name": "restarter-loop", "command": []string{"sleep", "0.2"},
		"pod": "restarter", "restart_policy": "always",
	}), &spec)
	te.Must(http.StatusNoContent, "POST", "/containers/"+spec.ID+"/start", nil)
	te.Must(http.StatusNoContent, "POST", "/containers/"+srv+"/kill?signal=KILL", nil)
	deadline := time.Now().Add(20 * time.Second)
	for {
		var c struct{ RestartCount int }
		json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+spec.ID+"/json", nil), &c)
		if c.RestartCount >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the always member restarted %d times in 20 s", c.RestartCount)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := infraStarted(); got != first {
		t.Fatalf("the infra container was restarted (started %s, then %s)", first, got)
	}
}

// TestPodBadInput checks the 4xx answers of the pod routes.
func TestPodBadInput(t *testing.T) {
	te := startEngine(t)
	te.CreatePod(map[string]any{"name": "taken"})
	cases := []struct {
		method, path string
		body         any
		want         int
		mention      string
	}{
		{"GET", "/pods/nope/json", nil, 404, "no such pod"},
		{"GET", "/pods/nope/exists", nil, 404, "no such pod"},
		{"POST", "/pods/nope/start", nil, 404, "no such pod"},
		{"DELETE", "/pods/nope", nil, 404, "no such pod"},
		{"GET", "/pods/nope/top", nil, 404, "no such pod"},
		{"GET", "/pods/taken/top?ps_args=-eo,pid,bogus", nil, 400, "ps_args"},
		{"GET", "/pods/taken/top?ps_args=nosuchdescriptor", nil, 400, "nosuchdescriptor"},
		{"POST", "/pods/create", map[string]any{"name": "taken"}, 409, "in use"},
		{"POST", "/pods/create", map[string]any{"name": "x", "no_such_option": true}, 400, "no_such_option"},
		{"POST", "/pods/create", map[string]any{"name": "x", "infra_conmon_pid_file": "/tmp/x"}, 400, "infra_conmon_pid_file"},
		{"POST", "/pods/create", map[string]any{"name": "x", "exit_policy": "never"}, 400, "exit_policy"},
		{"POST", "/pods/create", map[string]any{"name": "x", "shared_namespaces": []string{"cgroup"}}, 400, "shared_namespaces"},
		{"POST", "/pods/create", map[string]any{"name": "x", "infra_image": "localhost/none:1"}, 400, "infra_image"},
		{"POST", "/pods/create", "{", 400, "body"},
		{"POST", "/pods/taken/kill?signal=BOGUS", nil, 400, "signal"},
		{"GET", "/pods/stats?all=true&namesOrIDs=taken", nil, 400, "all"},
		{"GET", "/pods/stats?namesOrIDs=nope", nil, 404, "no such pod"},
		{"GET", "/pods/stats?namesOrIDs=taken&stream=true&delay=0", nil, 400, "delay"},
		{"GET", "/pods/json?filters=" + `{"bogus":["x"]}`, nil, 400, "bogus"},
		{"GET", "/pods/json?filters=" + `{"status":["sleeping"]}`, nil, 400, "sleeping"},
		{"POST", "/containers/create", map[string]any{"image": "localhost/busybox:latest", "pod": "nope"}, 404, "no such pod"},
		{"POST", "/containers/create", map[string]any{"image": "localhost/busybox:latest", "pod": "taken", "netns": map[string]string{"nsmode": "host"}}, 400, "netns"},
		{"POST", "/containers/create", map[string]any{"image": "localhost/busybox:latest", "pod": "taken", "hostname": "h"}, 400, "hostname"},
		{"POST", "/pods/taken/stop", nil, 304, ""},
	}
	for _, c := range cases {
		status, body := te.Do(c.method, c.path, c.body)
		if status != c.want || !strings.Contains(string(body), c.mention) {
			t.Errorf("%s %s: %d %s, want %d mentioning %q", c.method, c.path, status, body, c.want, c.mention)
		}
	}
	te.Must(http.StatusNoContent, "GET", "/pods/taken/exists", nil)
}

// TestPodListFilters checks every filter of the pod listing.
func TestPodListFilters(t *testing.T) {
	te := startEngine(t)
	a := te.CreatePod(map[string]any{"name": "alpha", "labels": map[string]string{"tier": "web", "env": "prod"}})
	te.CreatePod(map[string]any{"name": "beta", "labels": map[string]string{"tier": "db"}})
	te.CreatePod(map[string]any{"name": "gamma", "no_infra": true})
	member := te.createIn("alpha", "alpha-worker", "busybox", "sleep", "1000")
	te.Must(http.StatusOK, "POST", "/pods/alpha/start", nil)
	cases := []struct {
		filters string
		want    string
	}{
		{`{}`, "alpha,beta,gamma"},
		{`{"name":["^al"]}`, "alpha"},
		{`{"id":["` + a[:10] + `"]}`, "alpha"},
		{`{"label":["tier=web"]}`, "alpha"},
		{`{"label":["tier"]}`, "alpha,beta"},
		{`{"label":["tier","env=prod"]}`, "alpha"},
		{`{"label!":["tier=web"]}`, "beta,gamma"},
		{`{"status":["running"]}`, "alpha"},
		{`{"status":["created"]}`, "beta,gamma"},
		{`{"ctr-names":["worker"]}`, "alpha"},
		{`{"ctr-ids":["` + member[:12] + `"]}`, "alpha"},
		{`{"ctr-status":["running"]}`, "alpha"},
		{`{"ctr-status":["created"]}`, "beta"},
		{`{"ctr-number":["0"]}`, "gamma"},
		{`{"ctr-number":["2"]}`, "alpha"},
		{`{"until":["2000-01-01T00:00:00Z"]}`, ""},
		{`{"until":["-1h"]}`, "alpha,beta,gamma"},
		{`{"network":["podman"]}`, ""},
		{`{"name":["a"],"status":["created"]}`, "beta,gamma"},
		// Several values of one filter: any may match (label: all must hold).
		{`{"name":["^alpha$","^gamma$"]}`, "alpha,gamma"},
		{`{"id":["` + a[:10] + `","nope"]}`, "alpha"},
		{`{"status":["running","created"]}`, "alpha,beta,gamma"},
		{`{"ctr-number":["0","2"]}`, "alpha,gamma"},
		{`{"ctr-status":["running","created"]}`, "alpha,beta"},
		{`{"label!":["tier=web","tier=db"]}`, "gamma"},
		{`{"name":["^alpha$","^beta$"],"label":["env"]}`, "alpha"},
	}
	for _, c := range cases {
		var list []struct{ Name string }
		json.Unmarshal(te.Must(http.StatusOK, "GET", "/pods/json?filters="+c.filters, nil), &list)
		var names []string
		for _, p := range list {
			names = append(names, p.Name)
		}
		if got := strings.Join(names, ","); got != c.want {
			t.Errorf("filters %s: %q, want %q", c.filters, got, c.want)
		}
	}
}
