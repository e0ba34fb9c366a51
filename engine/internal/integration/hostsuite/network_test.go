package hostsuite

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/need"
	"github.com/berth-project/berth/engine/internal/testsupport/poll"
	"github.com/berth-project/berth/shared/testnet"
)

// TestBridgePublishedPort: a container on the default bridge network
// answers on a port published on the host's loopback, and the traffic
// shows in its network stats.
func TestBridgePublishedPort(t *testing.T) {
	l := startLab(t)
	need.All(t, "host suite tests", "/usr/lib/podman/netavark")
	port := testnet.FreePort(t)
	id := l.Run(map[string]any{"name": "web", "command": []string{"httpd", "-f", "-p", "80", "-h", "/etc"},
		"netns":        map[string]string{"nsmode": "bridge"},
		"portmappings": []map[string]any{{"host_ip": "127.0.0.1", "host_port": port, "container_port": 80, "protocol": "tcp"}},
	})
	body := poll.GetWithin(t, 30*time.Second, fmt.Sprintf("http://127.0.0.1:%d/hostname", port))
	if strings.TrimSpace(body) != id[:12] {
		t.Fatalf("published port answered %q, want the container's hostname %s", body, id[:12])
	}
	if s := l.stats(id); s.NetInput == 0 || s.NetOutput == 0 {
		t.Fatalf("network stats after a request: in %d, out %d", s.NetInput, s.NetOutput)
	}
	// The port is held while the container runs (its conmon holds it, in
	// a scope of its own under systemd): another container on it does not
	// start.
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if ln, err := net.Listen("tcp4", addr); err == nil {
		ln.Close()
		t.Fatalf("%s is free while web runs", addr)
	}
	l.Create(map[string]any{"name": "second", "command": []string{"true"}, "netns": map[string]string{"nsmode": "bridge"},
		"portmappings": []map[string]any{{"host_ip": "127.0.0.1", "host_port": port, "container_port": 80, "protocol": "tcp"}}})
	if code, out := l.Do("POST", "/containers/second/start", nil); code != http.StatusInternalServerError || !strings.Contains(string(out), "cannot listen on the TCP port") {
		t.Fatalf("start of a second container on the port: %d %s", code, out)
	}
}
