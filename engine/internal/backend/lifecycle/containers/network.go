package containers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/backend/execution/oci"
	"github.com/berth-project/berth/engine/internal/backend/platform/durable"
	"github.com/berth-project/berth/engine/internal/backend/resources/network"
	"github.com/berth-project/berth/engine/internal/core"
)

// bridged reports whether a container joins networks (its own namespace,
// set up by the network backend).
func bridged(s *core.ContainerSpec) bool { return s.NetNS.NSMode == core.NetNSBridge }

// resolveNetwork checks the network part of a creation request and fills
// in what it leaves open: the mode (bridge on the default network where
// networks exist), the networks, published ports (random host ports chosen,
// the image's exposed ports with publish_image_ports). A pod member that
// shares its pod's network takes it as the pod has it (inPodNet).
func (m *Manager) resolveNetwork(ctx context.Context, spec *core.ContainerSpec, img *core.Image, inPodNet bool) error {
	if len(spec.NetworkOptions) > 0 {
		return core.InvalidArgument("network_options", errors.New("network options are not supported (they configure slirp4netns and pasta)"))
	}
	wantsNetworks := len(spec.Networks) > 0 || len(spec.CNINetworks) > 0
	wantsPorts := len(spec.PortMappings) > 0 || spec.PublishExposedPorts
	if len(spec.NetworkOrder) > 0 && len(spec.Networks) == 0 {
		return core.InvalidArgument("networkOrder", errors.New("orders networks the request does not join"))
	}
	if inPodNet {
		if wantsNetworks {
			return core.InvalidArgument("networks", errors.New("the container shares its pod's network: set networks on the pod"))
		}
		if wantsPorts {
			return core.InvalidArgument("portmappings", errors.New("the container shares its pod's network: publish ports on the pod"))
		}
		return nil
	}
	mode := spec.NetNS.NSMode
	switch mode {
	case "", core.NetNSPrivate, core.NetNSBridge:
		if mode != core.NetNSBridge && m.privateNet && !wantsNetworks && !wantsPorts {
			spec.NetNS = core.Namespace{NSMode: core.NetNSPrivate}
			return nil
		}
		if m.nets == nil {
			if mode == core.NetNSBridge || wantsNetworks || wantsPorts {
				return core.InvalidArgument("netns", errors.New("this engine runs without a network backend"))
			}
			return nil
		}
		spec.NetNS = core.Namespace{NSMode: core.NetNSBridge}
		requested := make(map[string]core.PerNetworkOptions, len(spec.Networks)+len(spec.CNINetworks))
		for name, o := range spec.Networks {
			requested[name] = o
		}
		for _, name := range spec.CNINetworks {
			if _, ok := requested[name]; !ok {
				requested[name] = core.PerNetworkOptions{}
			}
		}
		if err := orderInterfaces(requested, spec.Networks, spec.NetworkOrder); err != nil {
			return err
		}
		spec.NetworkOrder = nil
		nets, err := m.nets.Resolve(ctx, requested)
		if err != nil {
			return err
		}
		spec.Networks, spec.CNINetworks = nets, nil
		if wantsPorts {
			if err := m.checkPortsReachable(ctx, nets); err != nil {
				return err
			}
		}
		ports, err := resolvePorts(spec, img)
		if err != nil {
			return err
		}
		spec.PortMappings = ports
		return nil
	case core.NetNSNone, core.NetNSHost, core.NetNSPath, core.NetNSContainer:
	default:
		return core.InvalidArgument("netns", fmt.Errorf("network mode %q is not supported (bridge, none, host, ns:PATH, container:ID)", mode))
	}
	if wantsNetworks {
		return core.InvalidArgument("networks", fmt.Errorf("a container with network mode %s joins no network", mode))
	}
	if wantsPorts {
		return core.InvalidArgument("portmappings", fmt.Errorf("ports cannot be published with network mode %s", mode))
	}
	switch mode {
	case core.NetNSPath:
		if !filepath.IsAbs(spec.NetNS.Value) {
			return core.InvalidArgument("netns", fmt.Errorf("path %q is not absolute", spec.NetNS.Value))
		}
	case core.NetNSContainer:
		target, err := m.lookup(spec.NetNS.Value)
		if err != nil {
			return err
		}
		spec.NetNS.Value = m.snapshot(target).ID
	}
	return nil
}

// checkPortsReachable refuses published ports for a container none of
// whose networks is a bridge: netavark forwards host ports to bridge
// networks only, and would drop them without a word on macvlan.
func (m *Manager) checkPortsReachable(ctx context.Context, nets map[string]core.PerNetworkOptions) error {
	for name := range nets {
		n, err := m.nets.Lookup(ctx, name)
		if err != nil {
			return err
		}
		if n.Driver == "bridge" {
			return nil
		}
	}
	return core.InvalidArgument("portmappings", errors.New("ports are published on bridge networks only, and the container joins none"))
}

// portProtocols are the protocols a port may be published for.
var portProtocols = map[string]bool{"tcp": true, "udp": true, "sctp": true}

// resolvePorts validates the requested port mappings, splits "tcp,udp"
// into one mapping per protocol, adds the image's and the request's exposed
// ports when publish_image_ports is set, and picks free host ports where
// the request leaves them open.
func resolvePorts(spec *core.ContainerSpec, img *core.Image) ([]core.PortMapping, error) {
	var out []core.PortMapping
	for i, p := range spec.PortMappings {
		field := fmt.Sprintf("portmappings[%d]", i)
		if p.ContainerPort == 0 {
			return nil, core.InvalidArgument(field, errors.New("a container port is required"))
		}
		if p.Range == 0 {
			p.Range = 1
		}
		if int(p.ContainerPort)+int(p.Range)-1 > 65535 || (p.HostPort != 0 && int(p.HostPort)+int(p.Range)-1 > 65535) {
			return nil, core.InvalidArgument(field, fmt.Errorf("port range of %d from %d/%d goes beyond 65535", p.Range, p.HostPort, p.ContainerPort))
		}
		if p.HostIP != "" {
			ip := net.ParseIP(p.HostIP)
			if ip == nil {
				return nil, core.InvalidArgument(field, fmt.Errorf("host IP %q is not an IP address", p.HostIP))
			}
			p.HostIP = ip.String()
		}
		protos := strings.Split(strings.ToLower(p.Protocol), ",")
		if p.Protocol == "" {
			protos = []string{"tcp"}
		}
		for _, proto := range protos {
			if !portProtocols[proto] {
				return nil, core.InvalidArgument(field, fmt.Errorf("protocol %q is not tcp, udp or sctp", proto))
			}
			one := p
			one.Protocol = proto
			out = append(out, one)
		}
	}
	if spec.PublishExposedPorts {
		for _, e := range exposedPorts(spec, img) {
			mapped := false
			for _, p := range out {
				if p.Protocol == e.Protocol && e.ContainerPort >= p.ContainerPort && int(e.ContainerPort) < int(p.ContainerPort)+int(p.Range) {
					mapped = true
				}
			}
			if !mapped {
				out = append(out, core.PortMapping{ContainerPort: e.ContainerPort, Range: 1, Protocol: e.Protocol})
			}
		}
	}
	type hostPort struct {
		ip, proto string
		port      int
	}
	taken := map[hostPort]bool{}
	for _, p := range out {
		for i := 0; p.HostPort != 0 && i < int(p.Range); i++ {
			k := hostPort{p.HostIP, p.Protocol, int(p.HostPort) + i}
			if taken[k] {
				return nil, core.InvalidArgument("portmappings", fmt.Errorf("host port %d/%s is published twice", k.port, k.proto))
			}
			taken[k] = true
		}
	}
	for i := range out {
		p := &out[i]
		if p.HostPort != 0 {
			continue
		}
		port, err := freeHostPorts(p.HostIP, p.Protocol, int(p.Range), func(port int) bool {
			for j := 0; j < int(p.Range); j++ {
				if taken[hostPort{p.HostIP, p.Protocol, port + j}] {
					return false
				}
			}
			return true
		})
		if err != nil {
			return nil, err
		}
		p.HostPort = uint16(port)
		for j := 0; j < int(p.Range); j++ {
			taken[hostPort{p.HostIP, p.Protocol, port + j}] = true
		}
	}
	return out, nil
}

// exposedPort is a port a container declares without publishing it.
type exposedPort struct {
	ContainerPort uint16
	Protocol      string
}

// exposedPorts lists the image's EXPOSE ports and the request's expose
// ports, sorted.
func exposedPorts(spec *core.ContainerSpec, img *core.Image) []exposedPort {
	set := map[exposedPort]bool{}
	if img != nil {
		for k := range img.Config.Config.ExposedPorts {
			portStr, proto, _ := strings.Cut(k, "/")
			if proto == "" {
				proto = "tcp"
			}
			if n, err := strconv.ParseUint(portStr, 10, 16); err == nil && n > 0 {
				set[exposedPort{uint16(n), proto}] = true
			}
		}
	}
	for port, protos := range spec.Expose {
		if protos == "" {
			protos = "tcp"
		}
		for _, proto := range strings.Split(protos, ",") {
			set[exposedPort{port, proto}] = true
		}
	}
	out := make([]exposedPort, 0, len(set))
	for e := range set {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ContainerPort != out[j].ContainerPort {
			return out[i].ContainerPort < out[j].ContainerPort
		}
		return out[i].Protocol < out[j].Protocol
	})
	return out
}

// checkExpose validates the request's expose map.
func checkExpose(spec *core.ContainerSpec) error {
	for port, protos := range spec.Expose {
		if port == 0 {
			return core.InvalidArgument("expose", errors.New("port 0 cannot be exposed"))
		}
		for _, proto := range strings.Split(protos, ",") {
			if proto != "" && !portProtocols[proto] {
				return core.InvalidArgument("expose", fmt.Errorf("protocol %q is not tcp, udp or sctp", proto))
			}
		}
	}
	return nil
}

// freeHostPorts finds count consecutive host ports that can be bound on ip
// for proto and that ok accepts: the kernel's choice for one port, a random
// probe in the ephemeral range for several.
func freeHostPorts(ip, proto string, count int, ok func(int) bool) (int, error) {
	for attempt := 0; attempt < 100; attempt++ {
		first, err := probePort(ip, proto, 0)
		if err != nil {
			return 0, err
		}
		if first+count-1 > 65535 || !ok(first) {
			continue
		}
		free := true
		for i := 1; i < count && free; i++ {
			_, err := probePort(ip, proto, first+i)
			free = err == nil
		}
		if free {
			return first, nil
		}
	}
	return 0, fmt.Errorf("no %d free host port(s) for %s: %w", count, proto, core.ErrAddressInUse)
}

// probePort binds ip:port for proto (sctp is probed as tcp) and releases it
// at once; it answers the bound port.
func probePort(ip, proto string, port int) (int, error) {
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	if proto == "udp" {
		c, err := net.ListenPacket("udp", addr)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		return c.LocalAddr().(*net.UDPAddr).Port, nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// holdHostPorts binds the container's published host ports for its
// monitor (conmon) to hold while the container runs (see
// network.HoldHostPorts). A start or restore holds them before it sets up
// anything else, so that a port something else holds fails it with a
// *core.HostPortError and nothing to undo: no forwarding rule of the
// port is written, which tearing down could confuse with the holder's.
// The caller hands the files to the runtime's create and closes its
// copies afterwards. A kill -9 of the engine leaves the ports held; the
// container's exit releases them.
func (m *Manager) holdHostPorts(rec *record) ([]*os.File, error) {
	if !bridged(&rec.Spec) || m.nets == nil || len(rec.Spec.PortMappings) == 0 {
		return nil, nil
	}
	return network.HoldHostPorts(rec.Spec.PortMappings)
}

// netNSAfterCreate tells whether a bridged container's network namespace
// is set up after the runtime created the container rather than before:
// a container with a user namespace of its own gets a network namespace
// that its user namespace owns (created by runc beside it, as Podman does),
// so that root in it can manage it and so that the members of its pod, who
// join its user namespace first, may join that network namespace too (a
// namespace prepared by the engine belongs to the host's).
func netNSAfterCreate(rec *record) bool {
	return bridged(&rec.Spec) && len(rec.UIDMap) > 0
}

// netNSPathOf is the namespace file a bridged container's config.json names.
func (m *Manager) netNSPathOf(rec *record) string {
	if netNSAfterCreate(rec) {
		return ""
	}
	if bridged(&rec.Spec) && m.nets != nil {
		return m.nets.NetNSPath(rec.ID)
	}
	return ""
}

// setupNetworkLocked sets up a bridged container's namespace before the
// runtime creates it, and points a container that joins another's
// namespace at it. The record knows the setup before netavark runs, so a
// crash in between still finds it to tear down.
func (m *Manager) setupNetworkLocked(ctx context.Context, e *entry) error {
	return m.setupNetworksLocked(ctx, e, nil)
}

// setupNetworksLocked is setupNetworkLocked with the per-network options
// of networks (addresses a restore asks for again) in place of the spec's.
func (m *Manager) setupNetworksLocked(ctx context.Context, e *entry, networks map[string]core.PerNetworkOptions) error {
	return m.setupNetworksIn(ctx, e, networks, "")
}

// setupNetworksIn is setupNetworksLocked; adopt, where set, is the
// container's own network namespace (netNSAfterCreate) to set up.
func (m *Manager) setupNetworksIn(ctx context.Context, e *entry, networks map[string]core.PerNetworkOptions, adopt string) error {
	rec := m.snapshot(e)
	if networks == nil {
		networks = rec.Spec.Networks
	}
	if rec.Spec.NetNS.NSMode == core.NetNSContainer {
		return m.joinNetNSLocked(rec)
	}
	if !bridged(&rec.Spec) || m.nets == nil {
		return nil
	}
	if rec.NetSetup != nil {
		m.teardownNetworkLocked(ctx, e)
	}
	planned := core.NetworkSetup{
		ContainerID: rec.ID, ContainerName: rec.Name,
		NetNSPath:    m.nets.NetNSPath(rec.ID),
		Networks:     networks,
		PortMappings: rec.Spec.PortMappings,
		DNSServers:   rec.Spec.DNSServers,
		AdoptNetNS:   adopt,
	}
	if err := m.update(ctx, e, func(r *record) { r.NetSetup = &planned }); err != nil {
		return err
	}
	done, status, err := m.nets.Setup(ctx, planned)
	if err != nil {
		m.update(ctx, e, func(r *record) { r.NetSetup = nil })
		return fmt.Errorf("set up the network of container %s: %w", rec.Name, err)
	}
	if err := m.update(ctx, e, func(r *record) { r.NetSetup, r.NetStatus = &done, status }); err != nil {
		return err
	}
	if err := m.writeNetworkFiles(m.snapshot(e)); err != nil {
		return err
	}
	m.refreshLinkers(rec.ID)
	return nil
}

// teardownNetworkLocked undoes setupNetworkLocked; failures are logged, the
// record forgets the setup either way.
func (m *Manager) teardownNetworkLocked(ctx context.Context, e *entry) {
	rec := m.snapshot(e)
	if rec.NetSetup == nil || m.nets == nil {
		return
	}
	if err := m.nets.Teardown(ctx, *rec.NetSetup); err != nil {
		m.logger.Warn("tear down container network", "container", rec.ID, "err", err)
	}
	m.update(ctx, e, func(r *record) { r.NetSetup, r.NetStatus = nil, nil })
}

// joinNetNSLocked points config.json at the namespace of the container
// this one joins, which must be running.
func (m *Manager) joinNetNSLocked(rec record) error {
	te, err := m.lookup(rec.Spec.NetNS.Value)
	if err != nil {
		return fmt.Errorf("container %s joins the network of %s: %w", rec.Name, rec.Spec.NetNS.Value, err)
	}
	target := m.snapshot(te)
	if target.State != core.StateRunning && target.State != core.StatePaused && target.State != core.StateCreated {
		return fmt.Errorf("container %s joins the network of %s, which is not running: %w", rec.Name, target.Name, core.ErrContainerStateImproper)
	}
	path := fmt.Sprintf("/proc/%d/ns/net", target.PID)
	if target.NetSetup != nil {
		path = target.NetSetup.NetNSPath
	}
	return editBundleSpec(rec.Bundle, func(spec *specs.Spec) error {
		for i, ns := range spec.Linux.Namespaces {
			if ns.Type == specs.NetworkNamespace {
				spec.Linux.Namespaces[i].Path = path
			}
		}
		return nil
	})
}

// readBundleSpec reads the OCI spec (config.json) of a bundle that prepare
// wrote.
func readBundleSpec(bundle string) (*specs.Spec, error) {
	data, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		return nil, err
	}
	var spec specs.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		return nil, err
	}
	return &spec, nil
}

// editBundleSpec rewrites the OCI spec of a bundle, changed by edit; the
// file is replaced whole, never half written.
func editBundleSpec(bundle string, edit func(*specs.Spec) error) error {
	spec, err := readBundleSpec(bundle)
	if err != nil {
		return err
	}
	if err := edit(spec); err != nil {
		return err
	}
	data, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	// It may hold secret environment variables: root only.
	return durable.WriteFile(filepath.Join(bundle, "config.json"), data, 0o600, ".config.json-")
}

// writeNetworkFiles rewrites /etc/resolv.conf (aardvark-dns first on DNS
// networks) and /etc/hosts (the container's own address) after a setup.
// The files are rewritten in place: they are bind-mounted.
func (m *Manager) writeNetworkFiles(rec record) error {
	var dnsServers, search []string
	for _, name := range sortedKeys(rec.NetStatus) {
		st := rec.NetStatus[name]
		for _, ip := range st.DNSServerIPs {
			dnsServers = append(dnsServers, ip.String())
		}
		search = append(search, st.DNSSearchDomains...)
	}
	resolv := oci.NetworkResolvConf(&rec.Spec, m.hostResolv, dnsServers, search)
	hostname := hostnameOf(&rec)
	var extra strings.Builder
	gateway := ""
	for _, name := range sortedKeys(rec.NetStatus) {
		for _, ifName := range sortedKeys(rec.NetStatus[name].Interfaces) {
			for _, a := range rec.NetStatus[name].Interfaces[ifName].Subnets {
				if extra.Len() == 0 {
					names := hostname + " " + rec.Name
					if d := rec.Spec.Domainname; d != "" {
						names = hostname + "." + d + " " + names
					}
					fmt.Fprintf(&extra, "%s\t%s\n", a.IPNet.IP, names)
				}
				if gateway == "" && a.Gateway != nil && a.IPNet.IP.To4() != nil {
					gateway = a.Gateway.String()
				}
			}
		}
	}
	hosts, err := oci.HostsFile(&rec.Spec, hostname, rec.Name, gateway)
	if err != nil {
		return err
	}
	base, err := baseHosts(&rec)
	if err != nil {
		return err
	}
	hosts = base + hosts
	hosts += m.linkHosts(&rec)
	if gateway != "" {
		fmt.Fprintf(&extra, "%s\thost.containers.internal\n", gateway)
	}
	if err := os.WriteFile(filepath.Join(rec.StaticDir, "resolv.conf"), []byte(resolv), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(rec.StaticDir, "hosts"), []byte(hosts+extra.String()), 0o644)
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ContainersOnNetwork maps the containers attached to a network to their
// names and interfaces on it.
func (m *Manager) ContainersOnNetwork(ctx context.Context, network string) (map[string]core.NetworkContainer, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := map[string]core.NetworkContainer{}
	for id, e := range m.byID {
		if e.removed || !bridged(&e.rec.Spec) {
			continue
		}
		if _, ok := e.rec.Spec.Networks[network]; !ok {
			continue
		}
		nc := core.NetworkContainer{Name: e.rec.Name}
		if st, ok := e.rec.NetStatus[network]; ok {
			nc.Interfaces = st.Interfaces
		}
		out[id] = nc
	}
	return out, nil
}

// orderInterfaces names the interfaces of the networks in order (Podman
// 6's networkOrder: the keys of networks, each once) eth0, eth1 ... where
// the request names none; the network backend numbers the rest.
func orderInterfaces(requested, networks map[string]core.PerNetworkOptions, order []string) error {
	if len(order) == 0 {
		return nil
	}
	if len(order) != len(networks) {
		return core.InvalidArgument("networkOrder", fmt.Errorf("lists %d networks, the request joins %d", len(order), len(networks)))
	}
	used := map[string]bool{}
	for _, o := range networks {
		if o.InterfaceName != "" {
			used[o.InterfaceName] = true
		}
	}
	seen := map[string]bool{}
	for _, name := range order {
		if _, ok := networks[name]; !ok || seen[name] {
			return core.InvalidArgument("networkOrder", fmt.Errorf("%q is not one of the networks the request joins, or is listed twice", name))
		}
		seen[name] = true
	}
	core.NameInterfaces(requested, order, used)
	return nil
}

// RemoveContainerForNetwork removes a container whose network goes.
func (m *Manager) RemoveContainerForNetwork(ctx context.Context, containerID string, timeout *uint) error {
	return m.Remove(ctx, containerID, core.RemoveContainerOptions{Force: true, Volumes: true, Timeout: timeout})
}

// running reports whether a container's namespace is set up and in use.
func running(rec *record) bool {
	return rec.NetSetup != nil && (rec.State == core.StateRunning || rec.State == core.StatePaused || rec.State == core.StateCreated)
}

// ConnectNetwork adds a network to a container; a running container gets
// the interface at once.
func (m *Manager) ConnectNetwork(ctx context.Context, container, network string, opts core.PerNetworkOptions) (string, string, error) {
	if m.nets == nil {
		return "", "", fmt.Errorf("this engine runs without a network backend: %w", core.ErrStateConflict)
	}
	e, rec, unlock, err := m.lockedLookup(container)
	if err != nil {
		return "", "", err
	}
	defer unlock()
	if !bridged(&rec.Spec) {
		return "", "", fmt.Errorf("container %s has network mode %s and cannot join networks: %w", rec.Name, netMode(&rec.Spec), core.ErrStateConflict)
	}
	if _, ok := rec.Spec.Networks[network]; ok {
		return "", "", fmt.Errorf("container %s is already connected to network %s: %w", rec.Name, network, core.ErrStateConflict)
	}
	if opts.InterfaceName == "" {
		used := map[string]bool{}
		for _, o := range rec.Spec.Networks {
			used[o.InterfaceName] = true
		}
		for i := 0; ; i++ {
			if name := fmt.Sprintf("eth%d", i); !used[name] {
				opts.InterfaceName = name
				break
			}
		}
	}
	for name, o := range rec.Spec.Networks {
		if o.InterfaceName == opts.InterfaceName {
			return "", "", core.InvalidArgument("interface_name", fmt.Errorf("interface %s is used for network %s", o.InterfaceName, name))
		}
	}
	links := rec.Spec.Links
	if len(opts.Links) > 0 {
		if links, err = m.mergeLinks(links, opts.Links); err != nil {
			return "", "", err
		}
		opts.Links = nil
	}
	resolved, err := m.nets.Resolve(ctx, map[string]core.PerNetworkOptions{network: opts})
	if err != nil {
		return "", "", err
	}
	opts = resolved[network]
	if running(&rec) {
		done, status, err := m.nets.Attach(ctx, *rec.NetSetup, network, opts)
		if err != nil {
			return "", "", err
		}
		err = m.update(ctx, e, func(r *record) {
			r.Spec.Networks = withEntry(r.Spec.Networks, network, opts)
			r.Spec.Links = links
			r.NetSetup.Networks = withEntry(r.NetSetup.Networks, network, done)
			// A new map: snapshots taken before share the old one.
			r.NetStatus = withEntry(r.NetStatus, network, status)
		})
		if err != nil {
			return "", "", err
		}
		return rec.ID, rec.Name, m.writeNetworkFiles(m.snapshot(e))
	}
	err = m.update(ctx, e, func(r *record) {
		r.Spec.Networks = withEntry(r.Spec.Networks, network, opts)
		r.Spec.Links = links
	})
	return rec.ID, rec.Name, err
}

// withEntry copies a map with one more entry.
func withEntry[V any](in map[string]V, name string, o V) map[string]V {
	out := make(map[string]V, len(in)+1)
	for k, v := range in {
		out[k] = v
	}
	out[name] = o
	return out
}

// withoutNetwork copies a network map without one entry.
func withoutNetwork[V any](in map[string]V, name string) map[string]V {
	out := make(map[string]V, len(in))
	for k, v := range in {
		if k != name {
			out[k] = v
		}
	}
	return out
}

// DisconnectNetwork removes a network from a container; a running
// container loses the interface at once (with force, even when netavark
// fails to remove it).
func (m *Manager) DisconnectNetwork(ctx context.Context, container, network string, force bool) (string, string, error) {
	e, rec, unlock, err := m.lockedLookup(container)
	if err != nil {
		return "", "", err
	}
	defer unlock()
	if _, ok := rec.Spec.Networks[network]; !ok || !bridged(&rec.Spec) {
		return "", "", fmt.Errorf("container %s is not connected to network %s: %w", rec.Name, network, core.ErrNoSuchNetwork)
	}
	if running(&rec) && m.nets != nil {
		if err := m.nets.Detach(ctx, *rec.NetSetup, network); err != nil && !force {
			return "", "", err
		}
	}
	err = m.update(ctx, e, func(r *record) {
		r.Spec.Networks = withoutNetwork(r.Spec.Networks, network)
		if r.NetSetup != nil {
			r.NetSetup.Networks = withoutNetwork(r.NetSetup.Networks, network)
		}
		r.NetStatus = withoutNetwork(r.NetStatus, network)
	})
	if err != nil {
		return "", "", err
	}
	if running(&rec) {
		return rec.ID, rec.Name, m.writeNetworkFiles(m.snapshot(e))
	}
	return rec.ID, rec.Name, nil
}

// networkSettings is inspect's NetworkSettings: the published and exposed
// ports and, while the namespace is set up, each network's addresses (also
// at the top level when the container is on the default network alone).
// A container in another's namespace reports that container's settings.
func (m *Manager) networkSettings(rec *record, depth int) *core.InspectNetworkSettings {
	if rec.Spec.NetNS.NSMode == core.NetNSContainer && depth == 0 {
		if te, err := m.lookup(rec.Spec.NetNS.Value); err == nil {
			target := m.snapshot(te)
			return m.networkSettings(&target, depth+1)
		}
	}
	out := &core.InspectNetworkSettings{Ports: portBindings(rec, true)}
	if !bridged(&rec.Spec) {
		return out
	}
	out.Networks = map[string]*core.InspectAdditionalNetwork{}
	for name, o := range rec.Spec.Networks {
		n := &core.InspectAdditionalNetwork{NetworkID: name, Aliases: o.Aliases, DriverOpts: map[string]string{}, IPAMConfig: map[string]string{}, Links: []string{}}
		if rec.NetSetup != nil {
			n.InspectBasicNetworkConfig = basicConfig(rec.NetStatus[name])
		}
		out.Networks[name] = n
	}
	if rec.NetSetup == nil {
		return out
	}
	out.SandboxKey = rec.NetSetup.NetNSPath
	if _, onDefault := rec.Spec.Networks[m.nets.DefaultNetwork()]; onDefault && len(rec.Spec.Networks) == 1 {
		out.InspectBasicNetworkConfig = basicConfig(rec.NetStatus[m.nets.DefaultNetwork()])
	}
	return out
}

// basicConfig reads the first IPv4 and IPv6 address, gateway and MAC of a
// network's status; further ones are secondary.
func basicConfig(st core.StatusBlock) core.InspectBasicNetworkConfig {
	var c core.InspectBasicNetworkConfig
	for _, ifName := range sortedKeys(st.Interfaces) {
		iface := st.Interfaces[ifName]
		for _, a := range iface.Subnets {
			size, _ := a.IPNet.Mask.Size()
			gw := ""
			if a.Gateway != nil {
				gw = a.Gateway.String()
			}
			if a.IPNet.IP.To4() != nil {
				if c.IPAddress == "" {
					c.IPAddress, c.IPPrefixLen, c.Gateway = a.IPNet.IP.String(), size, gw
				} else {
					c.SecondaryIPAddresses = append(c.SecondaryIPAddresses, core.InspectAddress{Addr: a.IPNet.IP.String(), PrefixLength: size})
				}
				continue
			}
			if c.GlobalIPv6Address == "" {
				c.GlobalIPv6Address, c.GlobalIPv6PrefixLen, c.IPv6Gateway = a.IPNet.IP.String(), size, gw
			} else {
				c.SecondaryIPv6Addresses = append(c.SecondaryIPv6Addresses, core.InspectAddress{Addr: a.IPNet.IP.String(), PrefixLength: size})
			}
		}
		if c.MacAddress == "" {
			c.MacAddress = iface.MacAddress.String()
		} else {
			c.AdditionalMacAddresses = append(c.AdditionalMacAddresses, iface.MacAddress.String())
		}
	}
	return c
}

// portBindings maps "PORT/PROTO" to the host addresses it is published on;
// with exposed, ports only exposed appear with no addresses.
func portBindings(rec *record, exposed bool) map[string][]core.InspectHostPort {
	out := map[string][]core.InspectHostPort{}
	for _, p := range rec.Spec.PortMappings {
		for i := 0; i < int(max(p.Range, 1)); i++ {
			key := fmt.Sprintf("%d/%s", int(p.ContainerPort)+i, p.Protocol)
			out[key] = append(out[key], core.InspectHostPort{HostIP: p.HostIP, HostPort: strconv.Itoa(int(p.HostPort) + i)})
		}
	}
	if exposed {
		for port, protos := range rec.Spec.Expose {
			if protos == "" {
				protos = "tcp"
			}
			for _, proto := range strings.Split(protos, ",") {
				key := fmt.Sprintf("%d/%s", port, proto)
				if _, ok := out[key]; !ok {
					out[key] = nil
				}
			}
		}
	}
	return out
}

// networkNames lists a bridged container's networks, sorted.
func networkNames(rec *record) []string {
	if !bridged(&rec.Spec) {
		return []string{}
	}
	return sortedKeys(rec.Spec.Networks)
}
