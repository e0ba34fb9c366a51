package podsapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestPodRestartPolicy: a pod's restart policy (Podman 5 and 6's pod create
// --restart) is that of every member that sets none: a member that fails
// is restarted as often as the pod says; a member with a policy of its own
// keeps it; pod inspect shows the pod's; a bad policy is a 400.
func TestPodRestartPolicy(t *testing.T) {
	te := startEngine(t)
	te.CreatePod(map[string]any{"name": "restarting", "restart_policy": "on-failure", "restart_tries": 2})
	if got := string(te.Must(http.StatusOK, "GET", "/pods/restarting/json", nil)); !strings.Contains(got, `"RestartPolicy":"on-failure"`) {
		t.Errorf("pod inspect: %s", got)
	}
	failing := te.createIn("restarting", "failing", "sh", "-c", "exit 3")
	var own struct {
		ID string `json:"Id"`
	}
	json.Unmarshal(te.Must(http.StatusCreated, "POST", "/containers/create", map[string]any{
		"image": "localhost/busybox:latest", "name": "own-policy", "command": []string{"sh", "-c", "exit 3"},
		"pod": "restarting", "restart_policy": "no",
	}), &own)
	policy := func(id string) (string, int, int, string) {
		var c struct {
			RestartCount int
			State        struct{ Status string }
			HostConfig   struct {
				RestartPolicy struct {
					Name              string
					MaximumRetryCount int
				}
			}
		}
		json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+id+"/json", nil), &c)
		return c.HostConfig.RestartPolicy.Name, c.HostConfig.RestartPolicy.MaximumRetryCount, c.RestartCount, c.State.Status
	}
	if name, tries, _, _ := policy(failing); name != "on-failure" || tries != 2 {
		t.Fatalf("a member without a policy: %s:%d, want the pod's on-failure:2", name, tries)
	}
	if name, _, _, _ := policy(own.ID); name != "no" {
		t.Fatalf("a member with its own policy: %q, want no", name)
	}
	te.Must(http.StatusOK, "POST", "/pods/restarting/start", nil)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, _, count, status := policy(failing)
		if count == 2 && status == "exited" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the failing member: %d restarts, %s after 20 s; want 2 and exited", count, status)
		}
	}
	if _, _, count, _ := policy(own.ID); count != 0 {
		t.Errorf("the member with policy no was restarted %d times", count)
	}

	status, body := te.Do("POST", "/pods/create", map[string]any{"name": "badpolicy", "restart_policy": "sometimes"})
	if status != http.StatusBadRequest || !strings.Contains(string(body), "restart_policy") {
		t.Errorf("a bad pod restart policy: %d %s", status, body)
	}
	status, body = te.Do("POST", "/pods/create", map[string]any{"name": "badtries", "restart_policy": "always", "restart_tries": 3})
	if status != http.StatusBadRequest || !strings.Contains(string(body), "restart_tries") {
		t.Errorf("retries with always: %d %s", status, body)
	}
}
