package dockercli

import (
	"strings"
	"testing"
	"time"
)

// TestContainerListFilters: docker ps and podman ps filter by health,
// volume (name or mount point), network, and published or exposed port
// (a port, a range, a protocol); a malformed value is refused naming it.
func TestContainerListFilters(t *testing.T) {
	te := startEngine(t)
	te.run("docker", "network", "create", "filtnet")
	te.run("docker", "run", "-d", "--name", "filtered", "--network", "filtnet", "-v", "filtvol:/data", "-p", "127.0.0.1::8080",
		"--expose", "9000/udp", "--health-cmd", "true", "--health-interval", "1s", "localhost/busybox:latest", "sleep", "300")
	te.run("docker", "run", "-d", "--name", "plain", "localhost/busybox:latest", "sleep", "300")
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(te.run("docker", "ps", "--filter", "health=healthy", "--format", "{{.Names}}"), "filtered") {
		if time.Now().After(deadline) {
			t.Fatal("the healthcheck never passed")
		}
		time.Sleep(200 * time.Millisecond)
	}
	for filter, want := range map[string]string{
		"health=healthy": "filtered", "health=none": "plain", "volume=filtvol": "filtered", "volume=/data": "filtered",
		"network=filtnet": "filtered", "publish=8080": "filtered", "publish=8000-8100/tcp": "filtered", "publish=8080/udp": "",
		"expose=9000/udp": "filtered", "expose=9000": "",
	} {
		for _, client := range []string{"docker", "podman"} {
			if got := strings.TrimSpace(te.run(client, "ps", "--filter", filter, "--format", "{{.Names}}")); got != want {
				t.Errorf("%s ps --filter %s: %q, want %q", client, filter, got, want)
			}
		}
	}
	contains(t, "a malformed port", te.fails("docker", "ps", "--filter", "publish=abc"), "publish=abc")
	contains(t, "an unknown health", te.fails("podman", "ps", "--filter", "health=sick"), "health")
	te.run("docker", "rm", "-f", "filtered", "plain")
	te.run("docker", "network", "rm", "filtnet")
}
