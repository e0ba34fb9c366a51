package network

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/berth-project/berth/engine/internal/core"
)

// The direct path: a netavark run costs a process, its netlink work and a
// dozen iptables execs that only (re)check the network's firewall chains,
// which is most of a short-lived container's life on a loaded machine.
// For the plain case — one IPv4 bridge network without options, lease
// range or published ports — the engine plumbs the container itself: a
// veth pair onto the bridge, the leased address, the default route, and on
// a DNS network the container's aardvark-dns entry. What netavark would do
// for the network (the bridge, its gateway address, forwarding and
// masquerading rules, a running aardvark-dns) is kept in place between
// containers by a keeper: a namespace of the engine's on that network
// (with a DNS entry of its own), set up by netavark once and torn down by
// netavark when the network is removed or the engine stops, which removes
// the bridge and the rules (and stops aardvark-dns) as netavark does after
// its last container.

// keeper is the namespace that holds a network's bridge and firewall rules
// in place.
type keeper struct {
	setup core.NetworkSetup
}

// directNetwork answers the one network of a setup when the direct path can
// serve it.
func directNetwork(s core.NetworkSetup, nets map[string]*core.Network) (*core.Network, bool) {
	if len(s.Networks) != 1 || len(s.PortMappings) > 0 || len(nets) != 1 {
		return nil, false
	}
	for _, n := range nets {
		if n.Driver != Driver || n.Internal || n.IPv6Enabled || len(n.Options) > 0 ||
			n.IPAMOptions["driver"] == "none" || len(n.Subnets) == 0 {
			return nil, false
		}
		for _, sub := range n.Subnets {
			ones, bits := sub.Subnet.Mask.Size()
			if bits != 32 || ones > 28 || sub.LeaseRange != nil || sub.Gateway == nil {
				return nil, false
			}
		}
		return n, true
	}
	return nil, false
}

// keeperAddress is the address a network's keeper holds: the subnet's last
// host address, the one the engine's allocator (lowest first) hands out last.
func keeperAddress(sub core.Subnet) net.IP {
	if ip := sub.Subnet.IP.To4(); ip != nil {
		mask := net.IP(sub.Subnet.Mask).To4()
		v := binary.BigEndian.Uint32(ip) | ^binary.BigEndian.Uint32(mask)
		out := make(net.IP, 4)
		binary.BigEndian.PutUint32(out, v-1)
		return out
	}
	// IPv6 (a sweep of a dual-stack network): the same, on 16 bytes.
	ip, mask := sub.Subnet.IP.To16(), sub.Subnet.Mask
	out := make(net.IP, net.IPv6len)
	for i := range out {
		out[i] = ip[i] | ^mask[i]
	}
	for i := len(out) - 1; i >= 0; i-- {
		out[i]--
		if out[i] != 0xff {
			break
		}
	}
	return out
}

// keeperPath is where a network's keeper namespace is mounted.
func (m *Manager) keeperPath(n *core.Network) string {
	return filepath.Join(m.keepDir, n.ID[:12])
}

// ensureKeeperLocked sets up n's keeper where none runs; the caller holds
// setupMu. It answers false when the network cannot have one (its keeper
// address is taken), so the container goes through netavark.
func (m *Manager) ensureKeeperLocked(ctx context.Context, n *core.Network) (bool, error) {
	if _, ok := m.keepers[n.Name]; ok {
		return true, nil
	}
	addrs := make([]net.IP, 0, len(n.Subnets))
	for _, sub := range n.Subnets {
		addrs = append(addrs, keeperAddress(sub))
	}
	ips, err := m.lease(ctx, n, n.ID, addrs)
	if errors.Is(err, core.ErrAddressInUse) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	s := core.NetworkSetup{
		ContainerID: n.ID, ContainerName: "berth-keeper-" + n.Name, NetNSPath: m.keeperPath(n),
		Networks: map[string]core.PerNetworkOptions{n.Name: {StaticIPs: ips, InterfaceName: "eth0"}},
	}
	if err := createNetNS(s.NetNSPath); err != nil {
		m.db.ReleaseAddresses(ctx, n.ID, n.ID)
		return false, err
	}
	nets := map[string]*core.Network{n.Name: n}
	if err := m.nv.run(ctx, "setup", s.NetNSPath, m.options(s, nets), nil); err != nil {
		removeNetNS(s.NetNSPath)
		m.db.ReleaseAddresses(ctx, n.ID, n.ID)
		return false, err
	}
	m.pinBridges(nets)
	m.keepers[n.Name] = &keeper{setup: s}
	return true, nil
}

// dropKeeperLocked tears n's keeper down (netavark removes the bridge and
// the network's rules when no container is left on it); the caller holds
// setupMu.
func (m *Manager) dropKeeperLocked(ctx context.Context, n *core.Network) error {
	k, ok := m.keepers[n.Name]
	if !ok {
		return nil
	}
	delete(m.keepers, n.Name)
	var errs []error
	if isNetNSMount(k.setup.NetNSPath) && m.nv.binary != "" {
		if err := m.nv.run(ctx, "teardown", k.setup.NetNSPath, m.options(k.setup, map[string]*core.Network{n.Name: n}), nil); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, removeEmptyDNChain(ctx, n), removeNetNS(k.setup.NetNSPath), m.db.ReleaseAddresses(ctx, n.ID, n.ID))
	return errors.Join(errs...)
}

// dropStaleKeepers tears down the keepers an engine that did not stop
// cleanly left behind.
func (m *Manager) dropStaleKeepers(ctx context.Context) {
	entries, _ := os.ReadDir(m.keepDir)
	for _, e := range entries {
		path := filepath.Join(m.keepDir, e.Name())
		var n *core.Network
		m.mu.RLock()
		for _, cand := range m.networks {
			if strings.HasPrefix(cand.ID, e.Name()) {
				n = copyNetwork(cand)
			}
		}
		m.mu.RUnlock()
		if n == nil {
			removeNetNS(path)
			continue
		}
		var ips []net.IP
		for _, sub := range n.Subnets {
			ips = append(ips, keeperAddress(sub))
		}
		m.setupMu.Lock()
		m.keepers[n.Name] = &keeper{setup: core.NetworkSetup{
			ContainerID: n.ID, ContainerName: "berth-keeper-" + n.Name, NetNSPath: path,
			Networks: map[string]core.PerNetworkOptions{n.Name: {StaticIPs: ips, InterfaceName: "eth0"}},
		}}
		if err := m.dropKeeperLocked(ctx, n); err != nil {
			m.logger.Warn("tear down the keeper of a network", "network", n.Name, "err", err)
		}
		m.setupMu.Unlock()
	}
}

// Close tears down the keepers: networks whose containers are gone lose
// their bridge and rules, as after netavark's last teardown; running
// containers keep theirs (netavark tears them down with the last one).
func (m *Manager) Close() {
	ctx := context.Background()
	m.setupMu.Lock()
	defer m.setupMu.Unlock()
	for name := range m.keepers {
		n, err := m.Lookup(ctx, name)
		if err != nil {
			delete(m.keepers, name)
			continue
		}
		if err := m.dropKeeperLocked(ctx, n); err != nil {
			m.logger.Warn("tear down the keeper of a network", "network", name, "err", err)
		}
		// What a teardown did not finish (the network's masquerading
		// rules were once left half removed at a stop in a busy CI run)
		// is swept: a bridge without ports, or rules without the bridge.
		if err := m.sweepLocked(ctx, n); err != nil {
			m.logger.Warn("remove what a cut teardown left of a network", "network", name, "err", err)
		}
	}
}

// hostVethName names the host end of a container's veth on the direct path.
func hostVethName(containerID string) string {
	return "bv" + containerID[:13]
}

// directSetup plumbs the container's namespace onto n's bridge: a veth pair
// (the container's end named as asked, with its static MAC if any), the
// leased addresses, loopback and the interface up, a default route through
// the gateway. It answers what netavark would.
func directSetup(s core.NetworkSetup, n *core.Network) (core.StatusBlock, error) {
	po := s.Networks[n.Name]
	br, err := netlink.LinkByName(n.NetworkInterface)
	if err != nil {
		return core.StatusBlock{}, fmt.Errorf("bridge %s: %w", n.NetworkInterface, err)
	}
	ns, err := netns.GetFromPath(s.NetNSPath)
	if err != nil {
		return core.StatusBlock{}, fmt.Errorf("open network namespace %s: %w", s.NetNSPath, err)
	}
	defer ns.Close()
	attrs := netlink.NewLinkAttrs()
	attrs.Name = hostVethName(s.ContainerID)
	attrs.MasterIndex = br.Attrs().Index
	veth := &netlink.Veth{LinkAttrs: attrs, PeerName: po.InterfaceName, PeerNamespace: netlink.NsFd(int(ns))}
	if po.StaticMAC != nil {
		veth.PeerHardwareAddr = net.HardwareAddr(po.StaticMAC)
	}
	if err := netlink.LinkAdd(veth); err != nil {
		return core.StatusBlock{}, fmt.Errorf("create veth pair: %w", err)
	}
	status, err := plumbContainerEnd(ns, s, n, po)
	if err == nil {
		err = netlink.LinkSetUp(veth)
	}
	if err != nil {
		netlink.LinkDel(veth)
		return core.StatusBlock{}, err
	}
	return status, nil
}

// plumbContainerEnd configures the container's end of the veth inside its
// namespace.
func plumbContainerEnd(ns netns.NsHandle, s core.NetworkSetup, n *core.Network, po core.PerNetworkOptions) (core.StatusBlock, error) {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return core.StatusBlock{}, fmt.Errorf("netlink in %s: %w", s.NetNSPath, err)
	}
	defer h.Close()
	if lo, err := h.LinkByName("lo"); err == nil {
		if err := h.LinkSetUp(lo); err != nil {
			return core.StatusBlock{}, fmt.Errorf("set loopback up: %w", err)
		}
	}
	link, err := h.LinkByName(po.InterfaceName)
	if err != nil {
		return core.StatusBlock{}, fmt.Errorf("container interface %s: %w", po.InterfaceName, err)
	}
	iface := core.NetInterface{MacAddress: core.HardwareAddr(link.Attrs().HardwareAddr)}
	var gateway net.IP
	for _, sub := range n.Subnets {
		for _, ip := range po.StaticIPs {
			if !sub.Subnet.Contains(ip) {
				continue
			}
			ipnet := net.IPNet{IP: ip, Mask: sub.Subnet.Mask}
			if err := h.AddrAdd(link, &netlink.Addr{IPNet: &ipnet}); err != nil {
				return core.StatusBlock{}, fmt.Errorf("add address %s: %w", &ipnet, err)
			}
			iface.Subnets = append(iface.Subnets, core.NetAddress{IPNet: core.IPNet{IPNet: ipnet}, Gateway: sub.Gateway})
			if gateway == nil {
				gateway = sub.Gateway
			}
		}
	}
	if err := h.LinkSetUp(link); err != nil {
		return core.StatusBlock{}, fmt.Errorf("set %s up: %w", po.InterfaceName, err)
	}
	if gateway != nil {
		if err := h.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Gw: gateway}); err != nil {
			return core.StatusBlock{}, fmt.Errorf("add default route via %s: %w", gateway, err)
		}
	}
	status := core.StatusBlock{Interfaces: map[string]core.NetInterface{po.InterfaceName: iface}}
	if n.DNSEnabled {
		// aardvark-dns answers on the gateways (netavark's answer).
		status.DNSServerIPs = gateways(n)
		status.DNSSearchDomains = []string{dnsSearchDomain}
	} else {
		status.DNSServerIPs = parseIPs(s.DNSServers)
	}
	return status, nil
}

// dnsSearchDomain is the search domain netavark answers for DNS networks.
const dnsSearchDomain = "dns.podman"

// gateways answers the gateway addresses of n's subnets.
func gateways(n *core.Network) []net.IP {
	var out []net.IP
	for _, sub := range n.Subnets {
		if sub.Gateway != nil {
			out = append(out, sub.Gateway)
		}
	}
	return out
}

// parseIPs answers the addresses among ss.
func parseIPs(ss []string) []net.IP {
	var out []net.IP
	for _, s := range ss {
		if ip := net.ParseIP(s); ip != nil {
			out = append(out, ip)
		}
	}
	return out
}

// addDirectDNSEntry writes the container's aardvark-dns entry on n, as
// netavark's setup would: its addresses, its name and DNS aliases, its own
// upstream servers.
func (m *Manager) addDirectDNSEntry(s core.NetworkSetup, n *core.Network) error {
	po := s.Networks[n.Name]
	e := dnsEntry{
		containerID: s.ContainerID,
		ips:         po.StaticIPs,
		names:       append([]string{s.ContainerName}, dnsAliases(s, po)...),
		servers:     parseIPs(s.DNSServers),
	}
	return m.nv.addDNSEntry(netavarkName(n), dnsHeader(gateways(n), n.NetworkDNSServers), e)
}

// directTeardown removes the container's interface on n (its peer on the
// bridge goes with it) before the namespace is released.
func directTeardown(s core.NetworkSetup, n *core.Network) error {
	ns, err := netns.GetFromPath(s.NetNSPath)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open network namespace %s: %w", s.NetNSPath, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("netlink in %s: %w", s.NetNSPath, err)
	}
	defer h.Close()
	name := s.Networks[n.Name].InterfaceName
	link, err := h.LinkByName(name)
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("container interface %s: %w", name, err)
	}
	if err := h.LinkDel(link); err != nil {
		return fmt.Errorf("delete container interface %s: %w", name, err)
	}
	return nil
}
