package dockercli

import (
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
)

// TestDockerMacvlanNetwork: docker network create -d macvlan with Docker's
// option names (parent, macvlan_mode) makes the engine's macvlan network,
// inspect shows them back, and docker run --ip gets a container onto it
// with its address.
func TestDockerMacvlanNetwork(t *testing.T) {
	te := startEngine(t)
	parent, peer := te.Nets.BridgePrefix+"mv0", te.Nets.BridgePrefix+"mv1"
	if out, err := exec.Command("ip", "link", "add", parent, "type", "veth", "peer", "name", peer).CombinedOutput(); err != nil {
		t.Fatalf("create the parent interface: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "link", "del", parent).Run() })
	exec.Command("ip", "link", "set", parent, "up").Run()
	exec.Command("ip", "link", "set", peer, "up").Run()
	_, block, err := net.ParseCIDR(te.Nets.SubnetPool[0])
	if err != nil {
		t.Fatal(err)
	}
	ip := block.IP.To4()
	prefix := fmt.Sprintf("%d.%d.%d.", ip[0], ip[1], ip[2]+9)
	subnet := prefix + "0/24"
	te.run("docker", "network", "create", "-d", "macvlan", "-o", "parent="+parent, "-o", "macvlan_mode=bridge", "--subnet", subnet, "dmac")
	if out := te.run("docker", "network", "inspect", "dmac", "--format", "{{.Driver}} {{.Options.parent}} {{.Options.macvlan_mode}}"); strings.TrimSpace(out) != "macvlan "+parent+" bridge" {
		t.Fatalf("inspect: %q", out)
	}
	te.run("docker", "run", "-d", "--name", "dm1", "--network", "dmac", "--ip", prefix+"30", "localhost/busybox", "sleep", "300")
	if out := te.run("docker", "exec", "dm1", "busybox", "ip", "-4", "addr", "show", "eth0"); !strings.Contains(out, "inet "+prefix+"30/24") {
		t.Fatalf("dm1's eth0: %s", out)
	}
	te.run("docker", "rm", "-f", "dm1")
	te.run("docker", "network", "rm", "dmac")
}
