package podsapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/poll"
	"github.com/berth-project/berth/shared/testnet"
)

// TestPodPublishedPorts: a pod on the default bridge network publishes a
// port on its infra container; a server in a member answers on the host's
// loopback through it. Members cannot publish ports or pick networks of
// their own. Removing the pod removes the infra container's namespace.
func TestPodPublishedPorts(t *testing.T) {
	te := startBridgedEngine(t)
	hostPort := testnet.FreePort(t)
	podID := te.CreatePod(map[string]any{"name": "published", "hostname": "pubhost",
		"portmappings": []map[string]any{{"host_ip": "127.0.0.1", "host_port": hostPort, "container_port": 80}}})
	te.createIn("published", "srv", "busybox", "httpd", "-f", "-p", "80", "-h", "/etc")
	te.Must(http.StatusOK, "POST", "/pods/published/start", nil)

	body := poll.GetWithin(t, 10*time.Second, fmt.Sprintf("http://127.0.0.1:%d/hostname", hostPort))
	if strings.TrimSpace(body) != "pubhost" {
		t.Fatalf("published port answered %q, want the pod's hostname", body)
	}

	var pod struct {
		InfraContainerID string
		InfraConfig      struct {
			PortBindings map[string][]struct{ HostIp, HostPort string }
			Networks     []string
		}
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/pods/published/json", nil), &pod)
	if b := pod.InfraConfig.PortBindings["80/tcp"]; len(b) != 1 || b[0].HostPort != fmt.Sprint(hostPort) || b[0].HostIp != "127.0.0.1" || len(pod.InfraConfig.Networks) != 1 {
		t.Fatalf("pod inspect infra config: %+v", pod.InfraConfig)
	}
	var list []struct{ Networks []string }
	json.Unmarshal(te.Must(http.StatusOK, "GET", `/pods/json?filters={"network":["`+pod.InfraConfig.Networks[0]+`"]}`, nil), &list)
	if len(list) != 1 || len(list[0].Networks) != 1 {
		t.Fatalf("pods on network %s: %+v", pod.InfraConfig.Networks[0], list)
	}

	for _, extra := range []map[string]any{
		{"portmappings": []map[string]any{{"container_port": 81}}},
		{"Networks": map[string]any{pod.InfraConfig.Networks[0]: map[string]any{}}},
	} {
		spec := map[string]any{"image": "localhost/busybox:latest", "command": []string{"true"}, "pod": "published"}
		for k, v := range extra {
			spec[k] = v
		}
		if status, data := te.Do("POST", "/containers/create", spec); status != http.StatusBadRequest {
			t.Fatalf("member with %v: %d %s, want 400", extra, status, data)
		}
	}

	te.Must(http.StatusOK, "DELETE", "/pods/published?force=true&timeout=0", nil)
	if _, err := os.Stat(filepath.Join(te.RunRoot, "netns", "berth-"+pod.InfraContainerID)); !os.IsNotExist(err) {
		t.Fatalf("the infra container's network namespace is left: %v", err)
	}
	if l := te.Leaks([]string{podID}, []string{pod.InfraContainerID}); len(l) > 0 {
		t.Fatalf("left behind:\n%s", strings.Join(l, "\n"))
	}
}
