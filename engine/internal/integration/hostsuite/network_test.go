package hostsuite

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/poll"
	"github.com/berth-project/berth/shared/testnet"
)

// TestBridgePublishedPort: a container on the default bridge network
// answers on a port published on the host's loopback, and the traffic
// shows in its network stats.
func TestBridgePublishedPort(t *testing.T) {
	l := startLab(t)
	requireFile(t, "/usr/lib/podman/netavark")
	port := testnet.FreePort(t)
	id := l.Run(map[string]any{"name": "web", "command": []string{"httpd", "-f", "-p", "80", "-h", "/etc"},
		"netns":        map[string]string{"nsmode": "bridge"},
		"portmappings": []map[string]any{{"host_ip": "127.0.0.1", "host_port": port, "container_port": 80, "protocol": "tcp"}},
	})
	client := &http.Client{Timeout: 2 * time.Second}
	var body string
	poll.Until(t, 30*time.Second, "the published port answering", func() bool {
		resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/hostname", port))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		body = string(data)
		return resp.StatusCode == http.StatusOK
	})
	if strings.TrimSpace(body) != id[:12] {
		t.Fatalf("published port answered %q, want the container's hostname %s", body, id[:12])
	}
	if s := l.stats(id); s.NetInput == 0 || s.NetOutput == 0 {
		t.Fatalf("network stats after a request: in %d, out %d", s.NetInput, s.NetOutput)
	}
}
