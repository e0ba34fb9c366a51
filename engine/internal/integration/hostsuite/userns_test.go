package hostsuite

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/need"
	"github.com/berth-project/berth/engine/internal/testsupport/poll"
	"github.com/berth-project/berth/shared/testnet"
)

// TestPodUserNamespaceOnBridge: on the host lab (cgroup v2, AppArmor), a
// pod with --userns=auto on the default bridge: its infra container creates
// the user namespace and the network namespace inside it, the engine sets
// the bridge up after the create, the member joins both (same user
// namespace, the pod's mappings), serves through the pod's published
// port, and what its root writes into a bind mount belongs to the pod's
// mapped uid.
func TestPodUserNamespaceOnBridge(t *testing.T) {
	l := startLab(t)
	need.All(t, "host suite tests", "/usr/bin/catatonit")
	need.All(t, "host suite tests", "/usr/lib/podman/netavark")
	// A user namespace's root must reach the engine's root filesystems.
	os.Chmod(filepath.Dir(l.Root), 0o711)
	out := t.TempDir()
	os.Chmod(out, 0o777)
	os.Chmod(filepath.Dir(out), 0o711)
	port := testnet.FreePort(t)
	l.Must(http.StatusCreated, "POST", "/pods/create", map[string]any{"name": "uspod",
		"userns":       map[string]string{"nsmode": "auto", "value": "size=2048"},
		"idmappings":   map[string]any{"AutoUserNs": true, "AutoUserNsOpts": map[string]any{"Size": 2048}},
		"netns":        map[string]string{"nsmode": "bridge"},
		"portmappings": []map[string]any{{"host_ip": "127.0.0.1", "host_port": port, "container_port": 80, "protocol": "tcp"}},
	})
	var pod struct{ InfraContainerID string }
	l.Get("/pods/uspod/json", &pod)
	var infra struct {
		HostConfig struct{ IDMappings struct{ UidMap []string } }
	}
	l.Get("/containers/"+pod.InfraContainerID+"/json", &infra)
	if len(infra.HostConfig.IDMappings.UidMap) != 1 || !strings.HasSuffix(infra.HostConfig.IDMappings.UidMap[0], ":2048") {
		t.Fatalf("infra container of a --userns=auto:size=2048 pod: uid maps %v", infra.HostConfig.IDMappings.UidMap)
	}
	hostRoot := strings.Split(infra.HostConfig.IDMappings.UidMap[0], ":")[1]
	member := l.Run(map[string]any{"name": "usweb", "pod": "uspod",
		"mounts":  []map[string]any{{"destination": "/out", "source": out, "type": "bind"}},
		"command": []string{"sh", "-c", "cat /proc/self/uid_map > /out/map; cat /proc/net/dev > /out/dev; exec httpd -f -p 80 -h /etc"}})
	body := poll.GetWithin(t, 60*time.Second, fmt.Sprintf("http://127.0.0.1:%d/hostname", port))
	if strings.TrimSpace(body) != "uspod" {
		t.Errorf("published port answered %q, want the pod's hostname", body)
	}
	mapping, _ := os.ReadFile(filepath.Join(out, "map"))
	if f := strings.Fields(string(mapping)); len(f) != 3 || f[0] != "0" || f[1] != hostRoot || f[2] != "2048" {
		t.Errorf("member's uid_map %q, want 0 %s 2048", mapping, hostRoot)
	}
	if fi, err := os.Stat(filepath.Join(out, "map")); err != nil || strconv.FormatUint(uint64(fi.Sys().(*syscall.Stat_t).Uid), 10) != hostRoot {
		t.Errorf("file the member's root wrote into a bind mount: %v, want it owned by %s", err, hostRoot)
	}
	if dev, _ := os.ReadFile(filepath.Join(out, "dev")); !strings.Contains(string(dev), "eth0:") {
		t.Errorf("no eth0 in the member's network namespace:\n%s", dev)
	}
	ns := func(id string) string {
		pid := l.inspect(id).State.Pid
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/user", pid))
		if err != nil {
			t.Fatal(err)
		}
		return link
	}
	hostNS, _ := os.Readlink("/proc/self/ns/user")
	if a, b := ns(pod.InfraContainerID), ns(member); a != b || a == hostNS {
		t.Errorf("user namespaces: infra %s, member %s, host %s", a, b, hostNS)
	}
}
