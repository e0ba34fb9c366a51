package hostsuite

import (
	"fmt"
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
}
