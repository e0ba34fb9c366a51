package kubeapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/deploy/kube"
)

const serviceYAML = `apiVersion: v1
kind: Pod
metadata: {name: bksvc-long, annotations: {io.containers.sdnotify: ignore}}
spec:
  restartPolicy: Never
  containers:
  - {name: c, image: localhost/busybox:latest, command: [sleep, "1000"]}
---
apiVersion: v1
kind: Pod
metadata: {name: bksvc-short}
spec:
  restartPolicy: Never
  containers:
  - {name: c, image: localhost/busybox:latest, command: [sleep, "1"]}
`

// TestKubePlayServiceContainer: serviceContainer=true makes Podman's
// service container (named after the YAML's hash, the infra image, no
// network), started before the pods and answered in the report; a second
// play of the same YAML is refused while its pods run; the service
// container exits once every pod has exited, starts again with a pod, is
// replaced with replace=true and goes with kube down, leaving nothing.
func TestKubePlayServiceContainer(t *testing.T) {
	te := startEngine(t)
	name := kube.ServiceContainerName([]byte(serviceYAML))
	type ctrState struct {
		ID    string `json:"Id"`
		State struct {
			Status    string
			StartedAt string
		}
		Config struct {
			Labels map[string]string
		}
		HostConfig struct{ NetworkMode string }
	}
	inspect := func() (ctrState, int) {
		var s ctrState
		status, body := te.Do("GET", "/containers/"+name+"/json", nil)
		if status == http.StatusOK {
			json.Unmarshal(body, &s)
		}
		return s, status
	}
	waitFor := func(what string, ok func(ctrState, int) bool) ctrState {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			s, status := inspect()
			if ok(s, status) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("service container %s: %s: still %d %+v", name, what, status, s.State)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	report := te.play("?serviceContainer=true", serviceYAML)
	svc, status := inspect()
	if status != http.StatusOK || report.ServiceContainerID != svc.ID || svc.State.Status != "running" {
		t.Fatalf("report's service container %q, %s is %d %+v", report.ServiceContainerID, name, status, svc.State)
	}
	if svc.Config.Labels[kube.ServicePodsLabel] != "bksvc-long,bksvc-short" || svc.HostConfig.NetworkMode != "none" {
		t.Errorf("service container labels %v, network %s", svc.Config.Labels, svc.HostConfig.NetworkMode)
	}
	var member struct {
		Config struct{ Labels map[string]string }
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/bksvc-long-c/json", nil), &member)
	if member.Config.Labels[kube.ServiceLabel] != name {
		t.Errorf("member labels %v", member.Config.Labels)
	}

	// The same YAML again: its service container (and pods) are in use.
	if status, body := te.Raw("POST", "/kube/play?serviceContainer=true", "", strings.NewReader(serviceYAML)); status != http.StatusConflict || !strings.Contains(string(body), name) {
		t.Errorf("second play: %d %s", status, body)
	}

	// bksvc-short has exited by itself; stopping bksvc-long leaves no pod
	// running: the service container exits. A pod's start starts it again.
	te.Must(http.StatusOK, "POST", "/pods/bksvc-long/stop?t=0", nil)
	waitFor("exits when all pods have exited", func(s ctrState, status int) bool { return status == http.StatusOK && s.State.Status == "exited" })
	te.Must(http.StatusOK, "POST", "/pods/bksvc-long/start", nil)
	waitFor("starts again with a pod", func(s ctrState, status int) bool { return status == http.StatusOK && s.State.Status == "running" })

	// replace makes a new one.
	replaced := te.play("?serviceContainer=true&replace=true", serviceYAML)
	if replaced.ServiceContainerID == "" || replaced.ServiceContainerID == svc.ID {
		t.Errorf("replace: service container %q, was %q", replaced.ServiceContainerID, svc.ID)
	}
	if status, _ := te.Do("GET", "/containers/"+svc.ID+"/exists", nil); status != http.StatusNotFound {
		t.Errorf("the replaced service container is still there (%d)", status)
	}

	te.Must(http.StatusOK, "DELETE", "/kube/play", strings.NewReader(serviceYAML))
	if _, status := inspect(); status != http.StatusNotFound {
		t.Errorf("service container after kube down: %d", status)
	}
	if left := te.names("/containers/json?all=true", "Names"); len(left) != 0 {
		t.Errorf("containers left after kube down: %v", left)
	}
}
