package networksapi

import (
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/poll"
	"github.com/berth-project/berth/shared/testnet"
)

// ownRules answers the firewall rules (iptables -S lines of the nat and
// filter tables) that belong to a network block: the rules that name an
// address in it, and every rule of a chain that such a rule jumps to.
func ownRules(t testing.TB, block string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, table := range []string{"nat", "filter"} {
		data, err := exec.Command("iptables", "-t", table, "-S").Output()
		if err != nil {
			t.Fatalf("iptables -t %s -S: %v", table, err)
		}
		lines := strings.Split(string(data), "\n")
		chains := map[string]bool{}
		for _, line := range lines {
			if !strings.Contains(line, block+".") {
				continue
			}
			out[table+" "+line] = true
			f := strings.Fields(line)
			for i := 0; i+1 < len(f); i++ {
				if f[i] == "-j" && strings.HasPrefix(f[i+1], "NETAVARK-") && !strings.HasPrefix(f[i+1], "NETAVARK-HOSTPORT") {
					chains[f[i+1]] = true
				}
			}
		}
		for _, line := range lines {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "-A" && chains[f[1]] {
				out[table+" "+line] = true
			}
		}
	}
	return out
}

// TestTwoEnginesOneHost runs two engines side by side on one host, each
// with networks of its own (bridges, subnets) but, as every engine, a
// default network named "podman". One engine's containers publishing a
// port and going away — netavark's last teardown on its network — must
// leave the other engine's firewall rules and published ports as they
// were. netavark names a network's chains after the name it is given; with
// the network's name both engines' default networks shared one chain, and
// the first engine's teardown took the MASQUERADE rule and the port
// forwarding chain the other's containers used (TestContainersTalk's -P port
// not answering in CI beside a kube test engine).
func TestTwoEnginesOneHost(t *testing.T) {
	a := startEngine(t)
	b := startEngine(t)
	if a.Nets.DefaultNetwork != b.Nets.DefaultNetwork {
		t.Fatalf("the engines' default networks are %q and %q; the test needs one name", a.Nets.DefaultNetwork, b.Nets.DefaultNetwork)
	}
	blockA := strings.TrimSuffix(a.Nets.SubnetPool[0], ".0/20")

	portA := testnet.FreePort(t)
	srv := a.Run(map[string]any{"name": "srv", "command": []string{"httpd", "-f", "-p", "80", "-h", "/etc"},
		"portmappings": []map[string]any{{"host_ip": "127.0.0.1", "host_port": portA, "container_port": 80, "protocol": "tcp"}}})
	urlA := fmt.Sprintf("http://127.0.0.1:%d/hostname", portA)
	poll.Until(t, 20*time.Second, "engine A's published port answering", func() bool { return poll.Get(urlA) != "" })
	before := ownRules(t, blockA)
	if len(before) == 0 {
		t.Fatalf("no firewall rule names engine A's block %s.x", blockA)
	}

	// Engine B: a container publishing a port on its default network, then
	// removed, the network's last: netavark's complete teardown.
	portB := testnet.FreePort(t)
	b.Run(map[string]any{"name": "other", "command": []string{"httpd", "-f", "-p", "80", "-h", "/etc"},
		"portmappings": []map[string]any{{"host_ip": "127.0.0.1", "host_port": portB, "container_port": 80, "protocol": "tcp"}}})
	urlB := fmt.Sprintf("http://127.0.0.1:%d/hostname", portB)
	poll.Until(t, 20*time.Second, "engine B's published port answering", func() bool { return poll.Get(urlB) != "" })
	b.Must(http.StatusOK, "DELETE", "/containers/other?force=true&timeout=0", nil)
	if poll.Get(urlB) != "" {
		t.Fatal("engine B's port still answers after its container's removal")
	}

	after := ownRules(t, blockA)
	for rule := range before {
		if !after[rule] {
			t.Errorf("engine A's rule gone after engine B's teardown: %s", rule)
		}
	}
	if got := strings.TrimSpace(poll.Get(urlA)); got != srv[:12] {
		t.Errorf("engine A's published port answered %q after engine B's teardown, want %s", got, srv[:12])
	}
}
