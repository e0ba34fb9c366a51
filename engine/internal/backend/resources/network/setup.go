package network

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/berth-project/berth/engine/internal/backend/platform/state"
	"github.com/berth-project/berth/engine/internal/core"
)

// NetNSPath is where the engine keeps a container's network namespace.
func (m *Manager) NetNSPath(containerID string) string {
	return filepath.Join(m.netnsDir, "berth-"+containerID)
}

// validAlias matches a DNS name a container may be known by.
var validAlias = validName

// Resolve checks the networks a container asks for; no network means the
// default one. Networks are keyed by name in the answer, interfaces get
// names eth0, eth1 ... in the order of the network names where unset.
func (m *Manager) Resolve(ctx context.Context, requested map[string]core.PerNetworkOptions) (map[string]core.PerNetworkOptions, error) {
	if len(requested) == 0 {
		requested = map[string]core.PerNetworkOptions{m.defName: {}}
	}
	out := make(map[string]core.PerNetworkOptions, len(requested))
	m.mu.RLock()
	defer m.mu.RUnlock()
	for key, opts := range requested {
		if key == "default" {
			// Podman's client names the default network so when only
			// per-network options are given (--ip, --mac-address,
			// --network-alias without --network).
			key = m.defName
		}
		n, err := m.lookupLocked(key)
		if err != nil {
			return nil, err
		}
		if _, dup := out[n.Name]; dup {
			return nil, core.InvalidArgument("networks", fmt.Errorf("network %s is named twice", n.Name))
		}
		if err := checkPerNetwork(n, &opts); err != nil {
			return nil, err
		}
		out[n.Name] = opts
	}
	names := make([]string, 0, len(out))
	used := map[string]bool{}
	for name, o := range out {
		names = append(names, name)
		if o.InterfaceName != "" {
			if used[o.InterfaceName] {
				return nil, core.InvalidArgument("interface_name", fmt.Errorf("interface %s is named twice", o.InterfaceName))
			}
			used[o.InterfaceName] = true
		}
	}
	sort.Strings(names)
	core.NameInterfaces(out, names, used)
	return out, nil
}

// checkPerNetwork validates how a container joins network n.
func checkPerNetwork(n *core.Network, o *core.PerNetworkOptions) error {
	if o.InterfaceName != "" && !validBridge.MatchString(o.InterfaceName) {
		return core.InvalidArgument("interface_name", fmt.Errorf("%q is not a valid interface name", o.InterfaceName))
	}
	for _, a := range o.Aliases {
		if !validAlias.MatchString(a) {
			return core.InvalidArgument("aliases", fmt.Errorf("%q is not a valid name", a))
		}
	}
	if len(o.Aliases) > 0 && !n.DNSEnabled {
		return core.InvalidArgument("aliases", fmt.Errorf("network %s has DNS disabled, so aliases would not resolve", n.Name))
	}
	if o.StaticMAC != nil && len(o.StaticMAC) != 6 {
		return core.InvalidArgument("static_mac", fmt.Errorf("%s is not a 6-byte MAC address", o.StaticMAC))
	}
	seen := map[int]bool{}
	for i, ip := range o.StaticIPs {
		ip = normalizeIP(ip)
		o.StaticIPs[i] = ip
		idx := -1
		for j, s := range n.Subnets {
			if s.Subnet.Contains(ip) {
				idx = j
			}
		}
		if idx < 0 {
			return core.InvalidArgument("static_ips", fmt.Errorf("%s is in no subnet of network %s", ip, n.Name))
		}
		if seen[idx] {
			return core.InvalidArgument("static_ips", fmt.Errorf("two addresses in subnet %s of network %s", &n.Subnets[idx].Subnet.IPNet, n.Name))
		}
		seen[idx] = true
		if err := checkStaticAddress(n.Subnets[idx], ip); err != nil {
			return err
		}
	}
	return nil
}

// lease hands a container one address in each subnet of n: its static
// address where it asked for one, else the next free one of the subnet's
// pool (pickAddress).
func (m *Manager) lease(ctx context.Context, n *core.Network, containerID string, static []net.IP) ([]net.IP, error) {
	if len(n.Subnets) == 0 {
		return nil, nil
	}
	// Addresses left by an interrupted earlier setup of this container go first.
	if err := m.db.ReleaseAddresses(ctx, n.ID, containerID); err != nil {
		return nil, err
	}
	var picked []net.IP
	_, err := m.db.LeaseAddresses(ctx, n.ID, containerID, func(used map[string]bool, last map[string]string) (state.Lease, error) {
		picked = nil
		out := state.Lease{Last: map[string]string{}}
		for _, s := range n.Subnets {
			var ip net.IP
			for _, want := range static {
				if s.Subnet.Contains(want) {
					ip = want
				}
			}
			if ip != nil {
				if used[ip.String()] {
					return out, fmt.Errorf("IP address %s on network %s: %w", ip, n.Name, core.ErrAddressInUse)
				}
			} else {
				var err error
				pool := s.Subnet.String()
				if ip, err = pickAddress(s, used, net.ParseIP(last[pool])); err != nil {
					return out, err
				}
				out.Last[pool] = ip.String()
			}
			picked = append(picked, ip)
			out.IPs = append(out.IPs, ip.String())
		}
		return out, nil
	})
	if errors.Is(err, state.ErrDuplicate) {
		return nil, fmt.Errorf("network %s: %w", n.Name, core.ErrAddressInUse)
	}
	return picked, err
}

// options builds netavark's input for the given networks of a setup.
func (m *Manager) options(s core.NetworkSetup, nets map[string]*core.Network) netavarkOptions {
	opts := netavarkOptions{
		ContainerID: s.ContainerID, ContainerName: s.ContainerName,
		Networks:     map[string]netavarkPerNetwork{},
		NetworkInfo:  map[string]netavarkNetwork{},
		PortMappings: s.PortMappings,
		DNSServers:   s.DNSServers,
	}
	for name, n := range nets {
		po := s.Networks[name]
		pn := netavarkPerNetwork{InterfaceName: po.InterfaceName}
		for _, ip := range po.StaticIPs {
			pn.StaticIPs = append(pn.StaticIPs, ip.String())
		}
		if n.DNSEnabled {
			pn.Aliases = dnsAliases(s, po)
		}
		if po.StaticMAC != nil {
			pn.StaticMAC = po.StaticMAC.String()
		}
		opts.Networks[netavarkName(n)] = pn
		info := netavarkNetwork{
			Name: netavarkName(n), ID: n.ID, Driver: n.Driver, NetworkInterface: n.NetworkInterface,
			Subnets: n.Subnets, IPv6Enabled: n.IPv6Enabled, Internal: n.Internal, DNSEnabled: n.DNSEnabled,
			NetworkDNSServers: n.NetworkDNSServers, Options: n.Options,
			IPAMOptions: map[string]string{"driver": "host-local"},
		}
		if n.IPAMOptions["driver"] == "none" {
			info.IPAMOptions["driver"] = "none"
		}
		opts.NetworkInfo[netavarkName(n)] = info
	}
	return opts
}

// netavarkName is the name a network has in netavark's input. netavark
// names a network's firewall chains after a hash of it (NETAVARK-…,
// NETAVARK-DN-…) and aardvark-dns's file after it. A network's name is not
// unique on a host: every engine's default network is "podman", so two
// engines would share those chains, and the last teardown on one of them
// would take rules the other's containers still need (the MASQUERADE rule
// both put in the one chain, the other's published ports). The network's ID
// is unique, so netavark sees that.
func netavarkName(n *core.Network) string { return n.ID }

// statusByName keys netavark's answer (by netavarkName) by network name.
func statusByName(answer map[string]core.StatusBlock, nets map[string]*core.Network) map[string]core.StatusBlock {
	out := make(map[string]core.StatusBlock, len(answer))
	for name, n := range nets {
		if st, ok := answer[netavarkName(n)]; ok {
			out[name] = st
		}
	}
	return out
}

// dnsAliases are the names a container is known by on a DNS network
// besides its own: its aliases there, then its short ID.
func dnsAliases(s core.NetworkSetup, po core.PerNetworkOptions) []string {
	return append(append([]string(nil), po.Aliases...), s.ContainerID[:12])
}

// networksOf looks up the networks of a setup; missing ones are left out
// when tolerate is set, else they are an error.
func (m *Manager) networksOf(names []string, tolerate bool) (map[string]*core.Network, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := map[string]*core.Network{}
	for _, name := range names {
		n, ok := m.networks[name]
		if !ok {
			if tolerate {
				continue
			}
			return nil, fmt.Errorf("unable to find network with name %s: %w", name, core.ErrNoSuchNetwork)
		}
		out[name] = copyNetwork(n)
	}
	return out, nil
}

func namesOf(nets map[string]core.PerNetworkOptions) []string {
	out := make([]string, 0, len(nets))
	for name := range nets {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Setup creates the container's namespace, leases its addresses and runs
// netavark setup.
func (m *Manager) Setup(ctx context.Context, s core.NetworkSetup) (core.NetworkSetup, map[string]core.StatusBlock, error) {
	ctx = context.WithoutCancel(ctx)
	if m.nv.binary == "" {
		return s, nil, errors.New("netavark is not installed (looked in /usr/lib/podman, /usr/libexec/podman and PATH)")
	}
	nets, err := m.networksOf(namesOf(s.Networks), false)
	if err != nil {
		return s, nil, err
	}
	out := s
	out.Networks = make(map[string]core.PerNetworkOptions, len(s.Networks))
	ok := false
	defer func() {
		if !ok {
			m.db.ReleaseAddresses(context.WithoutCancel(ctx), "", s.ContainerID)
		}
	}()
	for name, po := range s.Networks {
		ips, err := m.lease(ctx, nets[name], s.ContainerID, po.StaticIPs)
		if err != nil {
			return s, nil, err
		}
		po.StaticIPs = ips
		out.Networks[name] = po
	}
	if s.AdoptNetNS != "" {
		err = bindNetNS(s.AdoptNetNS, s.NetNSPath)
	} else {
		err = createNetNS(s.NetNSPath)
	}
	if err != nil {
		return s, nil, err
	}
	m.setupMu.Lock()
	dns := m.beforeDNSChange(nets)
	status := map[string]core.StatusBlock{}
	direct := false
	if n, ok := directNetwork(out, nets); ok {
		if direct, err = m.ensureKeeperLocked(ctx, n); err != nil {
			m.logger.Warn("set up the keeper of a network; netavark sets up the container", "network", n.Name, "err", err)
			direct = false
		}
		if direct && n.DNSEnabled && m.nv.aardvarkPID() == 0 {
			// aardvark-dns is gone (killed): netavark's setup starts it again.
			direct = false
		}
		if direct {
			var st core.StatusBlock
			st, err = directSetup(out, n)
			if err == nil && n.DNSEnabled {
				if err = m.addDirectDNSEntry(out, n); err != nil {
					directTeardown(out, n)
				}
			}
			status[n.Name] = st
		}
	}
	if !direct {
		answer := map[string]core.StatusBlock{}
		err = m.nv.run(ctx, "setup", s.NetNSPath, m.options(out, nets), &answer)
		if err == nil {
			status = statusByName(answer, nets)
			m.pinBridges(nets)
		}
	}
	if err == nil {
		dns.await()
	}
	m.setupMu.Unlock()
	if err != nil {
		removeNetNS(s.NetNSPath)
		return s, nil, err
	}
	ok = true
	return out, status, nil
}

// pinBridges fixes the hardware address of the networks' bridges after a
// setup (see pinBridgeMAC); the caller holds setupMu, so no other setup
// adds a port in between. A failure is logged: the container runs, only
// its neighbours may lose the gateway for a while when it changes.
func (m *Manager) pinBridges(nets map[string]*core.Network) {
	for _, n := range nets {
		if n.Driver != Driver {
			// A macvlan network's interface is its parent, the host's.
			continue
		}
		if err := pinBridgeMAC(n.NetworkInterface); err != nil {
			m.logger.Warn("pin bridge address", "network", n.Name, "err", err)
		}
	}
}

// Teardown undoes Setup; networks removed since are skipped.
func (m *Manager) Teardown(ctx context.Context, s core.NetworkSetup) error {
	ctx = context.WithoutCancel(ctx)
	var errs []error
	nets, _ := m.networksOf(namesOf(s.Networks), true)
	var leased map[string][]string
	unrecorded := map[string]*core.Network{}
	if len(s.PortMappings) > 0 || !withAddresses(s) {
		var err error
		if leased, err = m.db.LeasedAddresses(ctx, s.ContainerID); err != nil {
			errs = append(errs, err)
		}
		// A setup a kill -9 cut before its record names no addresses,
		// and netavark's teardown needs them to find the container's
		// DNAT rules: they are the leased ones.
		s = withLeased(s, nets, leased)
		// Networks the container holds addresses on that s does not
		// name: a connect a kill -9 cut after netavark's setup, before
		// its record.
		if len(s.PortMappings) > 0 {
			unrecorded = m.networksByID(leased, nets)
		}
	}
	// netavark's port forwarding left: its teardown did not run or failed,
	// or it did not know the network.
	portsLeft := len(unrecorded) > 0
	if len(nets) > 0 && isNetNSMount(s.NetNSPath) && m.nv.binary != "" {
		m.setupMu.Lock()
		var err error
		if n, ok := directNetwork(s, nets); ok && m.keepers[n.Name] != nil {
			// The keeper holds the bridge, the rules and aardvark-dns:
			// only the container's interface and DNS entry go.
			err = directTeardown(s, n)
			if n.DNSEnabled {
				err = errors.Join(err, m.nv.removeDNSEntry(netavarkName(n), s.ContainerID))
			}
		} else {
			err = m.nv.run(ctx, "teardown", s.NetNSPath, m.options(s, nets), nil)
			if err != nil {
				// Each network on its own: what netavark could not
				// finish (an interface gone already) is swept.
				m.sweepAllLocked(ctx, nets)
				portsLeft = true
			}
			if interfaceGone(err) {
				// A setup or a teardown that a kill -9 of the engine cut
				// (netavark dies with it): the namespace is there, the
				// container's interface is not. Expected after a crash;
				// what netavark left is swept, the port rules below.
				m.logger.Info("tear down container network: its interface was gone already (a setup or teardown cut short); the rest is swept", "container", s.ContainerID, "detail", err)
				err = nil
			}
		}
		m.setupMu.Unlock()
		if err != nil {
			errs = append(errs, err)
		}
	} else if len(nets) > 0 {
		// Without its namespace netavark cannot tear the container down;
		// its DNS entries go all the same, or its names would keep
		// resolving.
		m.setupMu.Lock()
		for _, n := range nets {
			if n.DNSEnabled {
				if err := m.nv.removeDNSEntry(netavarkName(n), s.ContainerID); err != nil {
					errs = append(errs, err)
				}
			}
		}
		m.sweepAllLocked(ctx, nets)
		m.setupMu.Unlock()
		portsLeft = true
	}
	if portsLeft && len(s.PortMappings) > 0 {
		all := maps.Clone(nets)
		maps.Copy(all, unrecorded)
		m.setupMu.Lock()
		if err := m.removePortRules(ctx, s, all, leased); err != nil {
			errs = append(errs, err)
		}
		// The unrecorded networks' bridges go with their last interface.
		m.sweepAllLocked(ctx, unrecorded)
		m.setupMu.Unlock()
	}
	if err := m.db.ReleaseAddresses(ctx, "", s.ContainerID); err != nil {
		errs = append(errs, err)
	}
	if err := removeNetNS(s.NetNSPath); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// withAddresses reports whether every network of s names the container's
// addresses on it.
func withAddresses(s core.NetworkSetup) bool {
	for _, po := range s.Networks {
		if len(po.StaticIPs) == 0 {
			return false
		}
	}
	return true
}

// withLeased is s with the leased addresses (by network ID) on each of
// nets whose options name none. s's own map is not written.
func withLeased(s core.NetworkSetup, nets map[string]*core.Network, leased map[string][]string) core.NetworkSetup {
	out := s
	out.Networks = maps.Clone(s.Networks)
	for name, n := range nets {
		po, ok := out.Networks[name]
		if !ok || len(po.StaticIPs) > 0 {
			continue
		}
		ips := make([]net.IP, 0, len(leased[n.ID]))
		for _, ip := range leased[n.ID] {
			if parsed := net.ParseIP(ip); parsed != nil {
				ips = append(ips, parsed)
			}
		}
		po.StaticIPs = ips
		out.Networks[name] = po
	}
	return out
}

// networksByID answers the networks among the IDs of leased that are not in
// known, by name.
func (m *Manager) networksByID(leased map[string][]string, known map[string]*core.Network) map[string]*core.Network {
	out := map[string]*core.Network{}
	m.mu.RLock()
	defer m.mu.RUnlock()
	for name, n := range m.networks {
		if _, ok := leased[n.ID]; ok && known[name] == nil {
			out[name] = copyNetwork(n)
		}
	}
	return out
}

// Attach joins a set-up namespace to one more network.
func (m *Manager) Attach(ctx context.Context, s core.NetworkSetup, network string, po core.PerNetworkOptions) (core.PerNetworkOptions, core.StatusBlock, error) {
	ctx = context.WithoutCancel(ctx)
	nets, err := m.networksOf([]string{network}, false)
	if err != nil {
		return po, core.StatusBlock{}, err
	}
	ips, err := m.lease(ctx, nets[network], s.ContainerID, po.StaticIPs)
	if err != nil {
		return po, core.StatusBlock{}, err
	}
	po.StaticIPs = ips
	one := s
	one.Networks = map[string]core.PerNetworkOptions{network: po}
	answer := map[string]core.StatusBlock{}
	m.setupMu.Lock()
	dns := m.beforeDNSChange(nets)
	err = m.nv.run(ctx, "setup", s.NetNSPath, m.options(one, nets), &answer)
	if err == nil {
		m.pinBridges(nets)
		dns.await()
	}
	m.setupMu.Unlock()
	if err != nil {
		m.db.ReleaseAddresses(ctx, nets[network].ID, s.ContainerID)
		return po, core.StatusBlock{}, err
	}
	return po, statusByName(answer, nets)[network], nil
}

// Detach removes a set-up namespace from one of its networks.
func (m *Manager) Detach(ctx context.Context, s core.NetworkSetup, network string) error {
	ctx = context.WithoutCancel(ctx)
	nets, err := m.networksOf([]string{network}, true)
	if err != nil || len(nets) == 0 {
		return err
	}
	one := s
	one.Networks = map[string]core.PerNetworkOptions{network: s.Networks[network]}
	m.setupMu.Lock()
	err = m.nv.run(ctx, "teardown", s.NetNSPath, m.options(one, nets), nil)
	if err != nil {
		m.sweepAllLocked(ctx, nets)
	}
	m.setupMu.Unlock()
	if rerr := m.db.ReleaseAddresses(ctx, nets[network].ID, s.ContainerID); rerr != nil && err == nil {
		err = rerr
	}
	return err
}

// refreshDNS hands a network's DNS servers to a running aardvark-dns.
func (m *Manager) refreshDNS(ctx context.Context, n *core.Network) error {
	m.setupMu.Lock()
	defer m.setupMu.Unlock()
	return m.nv.updateDNSServers(netavarkName(n), n.NetworkDNSServers)
}

// ReleaseOrphans frees what containers that no longer exist left behind: a
// crash between a setup and its record leaves leases and namespace files.
func (m *Manager) ReleaseOrphans(ctx context.Context, exists func(containerID string) bool) {
	holders, err := m.db.LeaseHolders(ctx)
	if err != nil {
		m.logger.Warn("list address leases", "err", err)
	}
	m.mu.RLock()
	networkIDs := map[string]bool{}
	for _, n := range m.networks {
		networkIDs[n.ID] = true
	}
	m.mu.RUnlock()
	for _, id := range holders {
		// A network's ID holds its keeper's addresses.
		if !exists(id) && !networkIDs[id] {
			m.logger.Info("releasing addresses of a container that no longer exists", "container", id)
			m.db.ReleaseAddresses(ctx, "", id)
		}
	}
	entries, _ := os.ReadDir(m.netnsDir)
	for _, e := range entries {
		id, ok := strings.CutPrefix(e.Name(), "berth-")
		if ok && !exists(id) {
			m.logger.Info("removing the network namespace of a container that no longer exists", "container", id)
			removeNetNS(filepath.Join(m.netnsDir, e.Name()))
		}
	}
}

// interfaceGone reports whether err is netavark's teardown failing because
// the container's end of its veth pair is not in the namespace: a setup
// cut before netavark made it, or a teardown cut after netavark removed it
// and before the engine recorded that.
func interfaceGone(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "failed to delete container veth") && strings.Contains(msg, "No such device")
}
