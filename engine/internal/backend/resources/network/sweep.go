package network

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/berth-project/berth/engine/internal/core"
)

// What a cut teardown leaves. netavark removes a network's bridge and its
// firewall rules in the teardown of the last container it finds on the
// bridge, and only when it could remove that container's interface. A
// teardown that did not get there leaves them for good: netavark killed
// with the engine in the middle of one (it dies with the engine), or a
// later teardown that fails on an interface already gone ("failed to delete
// container veth eth1: No such device"). The sweep is that last teardown,
// done again: the network's keeper namespace joins the network and leaves
// it, and netavark, finding no other port on the bridge, removes the bridge
// and the rules. A sweep cut in turn leaves a keeper namespace, which the
// next engine tears down at start (dropStaleKeepers) the same way.

// sweepLocked removes n's bridge and firewall rules when no container is on
// the bridge any more but they are still there; the caller holds setupMu
// (every setup does too, so no container joins the bridge meanwhile).
func (m *Manager) sweepLocked(ctx context.Context, n *core.Network) error {
	if m.keepers[n.Name] != nil || m.nv.binary == "" || n.Driver != Driver || !m.leftOver(n) {
		return nil
	}
	m.logger.Warn("removing the bridge and firewall rules a cut teardown left", "network", n.Name, "bridge", n.NetworkInterface)
	ok, err := m.ensureKeeperLocked(ctx, n)
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("the network's keeper address is taken")
	}
	return m.dropKeeperLocked(ctx, n)
}

// sweepAllLocked sweeps each of nets; failures are logged.
func (m *Manager) sweepAllLocked(ctx context.Context, nets map[string]*core.Network) {
	for _, n := range nets {
		if err := m.sweepLocked(ctx, n); err != nil {
			m.logger.Warn("remove what a cut teardown left of a network", "network", n.Name, "err", err)
		}
	}
}

// leftOver reports whether n's bridge is there without a port, or its
// firewall rules are there without the bridge.
func (m *Manager) leftOver(n *core.Network) bool {
	if n.NetworkInterface == "" {
		return false
	}
	sys := filepath.Join("/sys/class/net", n.NetworkInterface)
	if _, err := os.Stat(sys); err == nil {
		ports, _ := os.ReadDir(filepath.Join(sys, "brif"))
		return len(ports) == 0
	}
	return len(firewallRulesOf(n)) > 0
}

// firewallRulesOf lists the iptables rules (filter and nat tables, IPv4 and
// IPv6) that name one of n's subnets.
func firewallRulesOf(n *core.Network) []string {
	var out []string
	for _, sub := range n.Subnets {
		if sub.Subnet.IP == nil {
			continue
		}
		cidr := sub.Subnet.String()
		tool := "iptables"
		if sub.Subnet.IP.To4() == nil {
			tool = "ip6tables"
		}
		for _, table := range []string{"filter", "nat"} {
			data, err := exec.Command(tool, "-w", "-t", table, "-S").Output()
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(data), "\n") {
				if strings.Contains(line, " "+cidr+" ") || strings.HasSuffix(line, " "+cidr) {
					out = append(out, table+": "+line)
				}
			}
		}
	}
	return out
}
