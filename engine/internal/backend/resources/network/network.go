// Package network implements core.Networks and core.ContainerNetworking:
// bridge networks recorded in the state database, the engine's own address
// management (leases in the database, static addresses for netavark), and
// each container's network namespace, set up and torn down by netavark
// (aardvark-dns answers names on networks with DNS).
package network

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/platform/listfilter"
	"github.com/berth-project/berth/engine/internal/backend/platform/state"
	"github.com/berth-project/berth/engine/internal/core"
)

// Driver is the engine's default network driver (see macvlan.go for the
// other).
const Driver = "bridge"

// Defaults of Options, the same as Podman's.
const (
	DefaultNetworkName  = "podman"
	DefaultBridge       = "podman0"
	DefaultSubnet       = "10.88.0.0/16"
	DefaultSubnetPool   = "10.89.0.0/16"
	DefaultBridgePrefix = "podman"
	defaultPoolSize     = 24
)

// Options configure a Manager.
type Options struct {
	DB *state.DB
	// RunRoot holds the network namespaces (RunRoot/netns) and netavark's
	// and aardvark-dns's files (RunRoot/networks).
	RunRoot string
	// Netavark and Aardvark are the binaries; empty finds them.
	Netavark, Aardvark string
	// DefaultNetwork, DefaultBridge and DefaultSubnet describe the network
	// created at first start and joined by containers that name none.
	DefaultNetwork, DefaultBridge, DefaultSubnet string
	// SubnetPool is where subnets of new networks come from, /24 each.
	SubnetPool []string
	// BridgePrefix names the bridges of new networks (PREFIX1, PREFIX2 ...).
	BridgePrefix string
	Logger       *slog.Logger
}

// Manager is the engine's network backend.
type Manager struct {
	db       *state.DB
	logger   *slog.Logger
	nv       *netavark
	netnsDir string
	keepDir  string
	defName  string
	pools    []*net.IPNet
	prefix   string

	// mu guards networks and serialises changes to them.
	mu       sync.RWMutex
	networks map[string]*core.Network // by name
	// encoded holds each network's JSON (its database record, which is
	// the wire form), so listings are answered without encoding.
	encoded map[string][]byte
	// listAll is the unfiltered listing, built on demand from encoded and
	// dropped whenever a network changes.
	listAll []byte
	users   core.NetworkUsers
	events  func(ctx context.Context, action string, n *core.Network, container, containerName string)

	// setupMu serialises netavark runs: aardvark-dns's configuration and
	// the firewall chains are shared between them. It guards keepers.
	setupMu sync.Mutex
	// keepers hold the bridges of networks the direct path serves, by
	// network name (see direct.go).
	keepers map[string]*keeper
}

var (
	_ core.Networks            = (*Manager)(nil)
	_ core.ContainerNetworking = (*Manager)(nil)
)

// Open loads the networks and creates the default network when it does not
// exist yet.
func Open(ctx context.Context, o Options) (*Manager, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.DefaultNetwork == "" {
		o.DefaultNetwork = DefaultNetworkName
	}
	if o.DefaultBridge == "" {
		o.DefaultBridge = DefaultBridge
	}
	if o.DefaultSubnet == "" {
		o.DefaultSubnet = DefaultSubnet
	}
	if len(o.SubnetPool) == 0 {
		o.SubnetPool = []string{DefaultSubnetPool}
	}
	if o.BridgePrefix == "" {
		o.BridgePrefix = DefaultBridgePrefix
	}
	if o.Netavark == "" {
		o.Netavark = findHelper("netavark", netavarkCandidates)
	}
	if o.Aardvark == "" && o.Netavark != "" {
		o.Aardvark = findHelper("aardvark-dns", []string{filepath.Join(filepath.Dir(o.Netavark), "aardvark-dns")})
	}
	m := &Manager{
		db: o.DB, logger: o.Logger,
		nv:       &netavark{binary: o.Netavark, aardvark: o.Aardvark, configDir: filepath.Join(o.RunRoot, "networks")},
		netnsDir: filepath.Join(o.RunRoot, "netns"),
		keepDir:  filepath.Join(o.RunRoot, "netns-keep"),
		keepers:  map[string]*keeper{},
		defName:  o.DefaultNetwork,
		prefix:   o.BridgePrefix,
		networks: map[string]*core.Network{},
		encoded:  map[string][]byte{},
	}
	for _, p := range o.SubnetPool {
		_, n, err := net.ParseCIDR(p)
		if err != nil {
			return nil, fmt.Errorf("network: subnet pool %q: %w", p, err)
		}
		if ones, _ := n.Mask.Size(); ones > defaultPoolSize || !isIPv4(n) {
			return nil, fmt.Errorf("network: subnet pool %s is not an IPv4 subnet of at least one /%d", p, defaultPoolSize)
		}
		m.pools = append(m.pools, n)
	}
	for _, dir := range []string{m.netnsDir, m.keepDir, m.nv.configDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("network: %w", err)
		}
	}
	recs, err := o.DB.Networks().List(ctx)
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		var n core.Network
		if err := json.Unmarshal(r.Data, &n); err != nil {
			return nil, fmt.Errorf("network %s: decode state: %w", r.Name, err)
		}
		m.networks[n.Name] = &n
		m.encoded[n.Name] = r.Data
	}
	m.dropStaleKeepers(ctx)
	if _, ok := m.networks[m.defName]; !ok {
		sub, err := core.ParseIPNet(o.DefaultSubnet)
		if err != nil {
			return nil, fmt.Errorf("network: default subnet %q: %w", o.DefaultSubnet, err)
		}
		req := core.Network{Name: m.defName, NetworkInterface: o.DefaultBridge, Subnets: []core.Subnet{{Subnet: sub}}}
		// The default network may shadow a host route of an earlier run's
		// bridge; it is the user's configuration, so it is not checked.
		if _, err := m.create(ctx, req, false, false); err != nil {
			return nil, fmt.Errorf("network: create default network %s: %w", m.defName, err)
		}
	}
	return m, nil
}

// SetUsers connects the container backend.
func (m *Manager) SetUsers(u core.NetworkUsers) {
	m.mu.Lock()
	m.users = u
	m.mu.Unlock()
}

// SetEventSink sets what is called after a network is created or removed
// and after a container is connected or disconnected.
func (m *Manager) SetEventSink(fn func(ctx context.Context, action string, n *core.Network, container, containerName string)) {
	m.mu.Lock()
	m.events = fn
	m.mu.Unlock()
}

func (m *Manager) emit(ctx context.Context, action string, n *core.Network, container, containerName string) {
	m.mu.RLock()
	fn := m.events
	m.mu.RUnlock()
	if fn != nil {
		fn(ctx, action, n, container, containerName)
	}
}

// DefaultNetwork names the network of containers that name none.
func (m *Manager) DefaultNetwork() string { return m.defName }

var validName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// reservedNames are network modes, not network names.
var reservedNames = map[string]bool{
	"bridge": true, "host": true, "none": true, "private": true, "container": true, "ns": true,
	"slirp4netns": true, "pasta": true, "default": true,
}

// validBridge matches a Linux interface name.
var validBridge = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,15}$`)

// copyNetwork returns a deep enough copy for callers to keep.
func copyNetwork(n *core.Network) *core.Network {
	out := *n
	out.Subnets = append([]core.Subnet(nil), n.Subnets...)
	out.NetworkDNSServers = append([]string(nil), n.NetworkDNSServers...)
	out.Labels = copyMap(n.Labels)
	out.Options = copyMap(n.Options)
	out.IPAMOptions = copyMap(n.IPAMOptions)
	if n.Docker != nil {
		d := *n.Docker
		d.Options = copyMap(d.Options)
		out.Docker = &d
	}
	return &out
}

func copyMap(in map[string]string) map[string]string {
	if in == nil {
		return nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// Create creates a network.
func (m *Manager) Create(ctx context.Context, req core.Network, ignoreIfExists bool) (*core.Network, error) {
	return m.create(context.WithoutCancel(ctx), req, ignoreIfExists, true)
}

func (m *Manager) create(ctx context.Context, req core.Network, ignoreIfExists, checkHost bool) (*core.Network, error) {
	n, created, err := m.createLocked(ctx, req, ignoreIfExists, checkHost)
	if err != nil {
		return nil, err
	}
	if created {
		m.emit(ctx, "create", n, "", "")
	}
	return copyNetwork(n), nil
}

// createLocked validates and records a network; it reports whether the
// network is new (false: ignoreIfExists found it).
func (m *Manager) createLocked(ctx context.Context, req core.Network, ignoreIfExists, checkHost bool) (*core.Network, bool, error) {
	if req.ID != "" {
		return nil, false, core.InvalidArgument("id", errors.New("a network's ID is chosen by the engine"))
	}
	if req.Name != "" && (len(req.Name) > 255 || !validName.MatchString(req.Name)) {
		return nil, false, core.InvalidArgument("name", fmt.Errorf("%q must match [a-zA-Z0-9][a-zA-Z0-9_.-]*", req.Name))
	}
	if reservedNames[req.Name] {
		return nil, false, core.InvalidArgument("name", fmt.Errorf("%q is a network mode, not a network name", req.Name))
	}
	if err := checkDriver(&req); err != nil {
		return nil, false, err
	}
	for _, s := range req.NetworkDNSServers {
		if net.ParseIP(s) == nil {
			return nil, false, core.InvalidArgument("network_dns_servers", fmt.Errorf("%q is not an IP address", s))
		}
	}
	for i := range req.Subnets {
		if err := validateSubnet(&req.Subnets[i], "subnets"); err != nil {
			return nil, false, err
		}
	}
	if req.NetworkInterface != "" && !validBridge.MatchString(req.NetworkInterface) {
		return nil, false, core.InvalidArgument("network_interface", fmt.Errorf("%q is not a valid interface name", req.NetworkInterface))
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if req.Name != "" {
		if existing, ok := m.networks[req.Name]; ok {
			if ignoreIfExists {
				return copyNetwork(existing), false, nil
			}
			return nil, false, fmt.Errorf("network name %s already used: %w", req.Name, core.ErrNetworkExists)
		}
	}
	if req.Driver == DriverMacvlan {
		// Macvlan networks share their parents; their names default as
		// bridges' do.
		if req.Name == "" {
			req.Name = m.freeBridgeLocked()
		}
	} else if req.NetworkInterface != "" {
		for _, n := range m.networks {
			if n.NetworkInterface == req.NetworkInterface {
				return nil, false, fmt.Errorf("bridge name %s already used by network %s: %w", req.NetworkInterface, n.Name, core.ErrNameInUse)
			}
		}
	} else {
		req.NetworkInterface = m.freeBridgeLocked()
	}
	if req.Name == "" {
		req.Name = req.NetworkInterface
		if _, ok := m.networks[req.Name]; ok {
			return nil, false, fmt.Errorf("network name %s already used: %w", req.Name, core.ErrNetworkExists)
		}
	}
	if err := m.assignSubnetsLocked(&req, checkHost); err != nil {
		return nil, false, err
	}
	req.ID = newID()
	req.Created = time.Now()
	if req.Labels == nil {
		req.Labels = map[string]string{}
	}
	if req.Options == nil {
		req.Options = map[string]string{}
	}
	if req.IPAMOptions == nil {
		req.IPAMOptions = map[string]string{}
	}
	if req.IPAMOptions["driver"] == "" {
		req.IPAMOptions["driver"] = "host-local"
	}
	data, err := json.Marshal(req)
	if err != nil {
		return nil, false, err
	}
	if err := m.db.Networks().Add(ctx, state.NetworkRecord{Name: req.Name, ID: req.ID, Created: req.Created, Data: data}); err != nil {
		if errors.Is(err, state.ErrDuplicate) {
			return nil, false, fmt.Errorf("network name %s already used: %w", req.Name, core.ErrNetworkExists)
		}
		return nil, false, err
	}
	n := req
	m.networks[n.Name] = &n
	m.encoded[n.Name] = data
	m.listAll = nil
	return copyNetwork(&n), true, nil
}

// checkOptions validates the driver and IPAM options netavark's bridge
// driver takes.
func checkOptions(req *core.Network) error {
	for k, v := range req.Options {
		switch k {
		case "mtu", "metric":
			if err := checkNumberOption(k, v); err != nil {
				return err
			}
		case "isolate":
			if v != "true" && v != "false" {
				return core.InvalidArgument("options", fmt.Errorf("isolate=%q must be true or false", v))
			}
		case "vlan":
			// Bridge VLANs arrived in netavark 1.14; Debian 12's 1.4 has
			// none and would drop the option without a word. Nor can the
			// engine set them itself here: this kernel is built without
			// bridge VLAN filtering (no bridge/vlan_filtering attribute;
			// setting it is "operation not supported").
			return core.InvalidArgument("options", fmt.Errorf("vlan=%q: bridge VLANs need bridge VLAN filtering in the kernel, which this kernel lacks, and netavark 1.14 or later (this one is 1.4)", v))
		default:
			return core.InvalidArgument("options", fmt.Errorf("%q is not a bridge option (mtu, metric, isolate)", k))
		}
	}
	v, err := ipamDriver(req)
	if err != nil {
		return err
	}
	switch v {
	case "", "host-local":
	case "none":
		if len(req.Subnets) > 0 {
			return core.InvalidArgument("ipam_options", errors.New("the none IPAM driver takes no subnets"))
		}
		if req.DNSEnabled {
			return core.InvalidArgument("ipam_options", errors.New("the none IPAM driver cannot serve DNS"))
		}
	default:
		return core.InvalidArgument("ipam_options", fmt.Errorf("driver %q is not supported (host-local, none)", v))
	}
	return nil
}

// ipamDriver answers the IPAM driver a network asks for; "driver" is the
// only IPAM option.
func ipamDriver(req *core.Network) (string, error) {
	for k := range req.IPAMOptions {
		if k != "driver" {
			return "", core.InvalidArgument("ipam_options", fmt.Errorf("%q is not an IPAM option (driver)", k))
		}
	}
	return req.IPAMOptions["driver"], nil
}

// checkNumberOption validates an mtu or metric option: a non-negative
// number, an mtu of 68 or more (0: the default).
func checkNumberOption(k, v string) error {
	var n uint32
	if _, err := fmt.Sscanf(v, "%d", &n); err != nil || fmt.Sprint(n) != v {
		return core.InvalidArgument("options", fmt.Errorf("%s=%q is not a non-negative number", k, v))
	}
	if k == "mtu" && n != 0 && n < 68 {
		return core.InvalidArgument("options", fmt.Errorf("mtu %d is below 68", n))
	}
	return nil
}

// freeBridgeLocked returns PREFIXn for the lowest n that no network and no
// host interface uses.
func (m *Manager) freeBridgeLocked() string {
	used := map[string]bool{}
	for _, n := range m.networks {
		used[n.NetworkInterface] = true
	}
	if ifs, err := net.Interfaces(); err == nil {
		for _, i := range ifs {
			used[i.Name] = true
		}
	}
	for i := 1; ; i++ {
		name := fmt.Sprintf("%s%d", m.prefix, i)
		if !used[name] {
			return name
		}
	}
}

// assignSubnetsLocked checks requested subnets against the other networks
// (and the host's routes) and picks subnets for a network that names none.
func (m *Manager) assignSubnetsLocked(req *core.Network, checkHost bool) error {
	if req.IPAMOptions["driver"] == "none" {
		return nil
	}
	if req.Driver == DriverMacvlan {
		// A macvlan network's subnet is its parent's link's: it is a
		// host route by design, and other macvlan networks on the same
		// link share it (as Podman lets them).
		for i, s := range req.Subnets {
			for _, o := range req.Subnets[:i] {
				if overlaps(&s.Subnet.IPNet, &o.Subnet.IPNet) {
					return core.InvalidArgument("subnets", fmt.Errorf("subnets %s and %s overlap", &s.Subnet.IPNet, &o.Subnet.IPNet))
				}
			}
			if !isIPv4(&s.Subnet.IPNet) {
				req.IPv6Enabled = true
			}
		}
		return nil
	}
	var taken []*net.IPNet
	for _, n := range m.networks {
		for _, s := range n.Subnets {
			sub := s.Subnet.IPNet
			taken = append(taken, &sub)
		}
	}
	var routes []*net.IPNet
	if checkHost {
		routes = hostRoutes()
	}
	for i, s := range req.Subnets {
		sub := s.Subnet.IPNet
		for _, t := range taken {
			if overlaps(&sub, t) {
				return fmt.Errorf("subnet %s overlaps subnet %s of another network: %w", &sub, t, core.ErrSubnetInUse)
			}
		}
		for _, r := range routes {
			if overlaps(&sub, r) {
				return fmt.Errorf("subnet %s is already used on the host (route to %s): %w", &sub, r, core.ErrSubnetInUse)
			}
		}
		for _, o := range req.Subnets[:i] {
			if overlaps(&sub, &o.Subnet.IPNet) {
				return core.InvalidArgument("subnets", fmt.Errorf("subnets %s and %s overlap", &sub, &o.Subnet.IPNet))
			}
		}
		if !isIPv4(&sub) {
			req.IPv6Enabled = true
		}
	}
	hasV4, hasV6 := false, false
	for _, s := range req.Subnets {
		if isIPv4(&s.Subnet.IPNet) {
			hasV4 = true
		} else {
			hasV6 = true
		}
	}
	free := func(c *net.IPNet) bool {
		for _, t := range append(taken, routes...) {
			if overlaps(c, t) {
				return false
			}
		}
		return true
	}
	if !hasV4 && !(req.IPv6Enabled && hasV6) {
		var found *net.IPNet
		for _, pool := range m.pools {
			if !isIPv4(pool) {
				continue
			}
			poolSubnets(pool, defaultPoolSize, func(c *net.IPNet) bool {
				if free(c) {
					found = c
					return false
				}
				return true
			})
			if found != nil {
				break
			}
		}
		if found == nil {
			return fmt.Errorf("no free subnet left in the pool %v: %w", m.pools, core.ErrSubnetInUse)
		}
		s := core.Subnet{Subnet: core.IPNet{IPNet: *found}}
		if err := validateSubnet(&s, "subnets"); err != nil {
			return err
		}
		req.Subnets = append(req.Subnets, s)
	}
	if req.IPv6Enabled && !hasV6 {
		var found *net.IPNet
		for i := 0; i < 100 && found == nil; i++ {
			if c := randomULA(); free(c) {
				found = c
			}
		}
		if found == nil {
			return fmt.Errorf("no free IPv6 subnet found: %w", core.ErrSubnetInUse)
		}
		s := core.Subnet{Subnet: core.IPNet{IPNet: *found}}
		if err := validateSubnet(&s, "subnets"); err != nil {
			return err
		}
		req.Subnets = append(req.Subnets, s)
	}
	return nil
}

func newID() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// lookupLocked finds a network by name, full ID or unique ID prefix.
func (m *Manager) lookupLocked(nameOrID string) (*core.Network, error) {
	if n, ok := m.networks[nameOrID]; ok {
		return n, nil
	}
	byID := func(yield func(string, *core.Network) bool) {
		for _, n := range m.networks {
			if !yield(n.ID, n) {
				return
			}
		}
	}
	found, ok, err := core.ByIDPrefix(byID, nameOrID)
	if err == nil && (!ok || nameOrID == "") {
		return nil, core.NoSuchNetwork(nameOrID)
	}
	return found, err
}

// Lookup returns a copy of a network.
func (m *Manager) Lookup(ctx context.Context, nameOrID string) (*core.Network, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n, err := m.lookupLocked(nameOrID)
	if err != nil {
		return nil, err
	}
	return copyNetwork(n), nil
}

// Inspect returns a network and its containers.
func (m *Manager) Inspect(ctx context.Context, nameOrID string) (*core.NetworkInspect, error) {
	n, err := m.Lookup(ctx, nameOrID)
	if err != nil {
		return nil, err
	}
	out := &core.NetworkInspect{Network: *n, Containers: map[string]core.NetworkContainer{}}
	if u := m.usersOrNil(); u != nil {
		ctrs, err := u.ContainersOnNetwork(ctx, n.Name)
		if err != nil {
			return nil, err
		}
		out.Containers = ctrs
	}
	return out, nil
}

func (m *Manager) usersOrNil() core.NetworkUsers {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.users
}

// List returns the networks matching filters, sorted by name.
func (m *Manager) List(ctx context.Context, filters map[string][]string) ([]*core.Network, error) {
	match, err := m.compile(filters, "name", "id", "driver", "label", "label!", "until", "dangling")
	if err != nil {
		return nil, err
	}
	m.mu.RLock()
	all := make([]*core.Network, 0, len(m.networks))
	for _, n := range m.networks {
		all = append(all, copyNetwork(n))
	}
	m.mu.RUnlock()
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	return match.Keep(ctx, all)
}

// ListJSON is List answered as the JSON array the API sends, built from
// each network's stored encoding; the unfiltered listing is kept between
// changes. Callers must not modify the answer.
func (m *Manager) ListJSON(ctx context.Context, filters map[string][]string) ([]byte, error) {
	match, err := m.compile(filters, "name", "id", "driver", "label", "label!", "until", "dangling")
	if err != nil {
		return nil, err
	}
	if len(filters) > 0 {
		m.mu.RLock()
		defer m.mu.RUnlock()
		return m.encodeLocked(ctx, match)
	}
	m.mu.RLock()
	cached := m.listAll
	m.mu.RUnlock()
	if cached != nil {
		return cached, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.listAll == nil {
		if m.listAll, err = m.encodeLocked(ctx, match); err != nil {
			return nil, err
		}
	}
	return m.listAll, nil
}

// encodeLocked joins the stored encodings of the networks match accepts,
// sorted by name, into a JSON array.
func (m *Manager) encodeLocked(ctx context.Context, match listfilter.Test[*core.Network]) ([]byte, error) {
	names := make([]string, 0, len(m.networks))
	size := 2
	for name, data := range m.encoded {
		names = append(names, name)
		size += len(data) + 1
	}
	sort.Strings(names)
	buf := bytes.NewBuffer(make([]byte, 0, size))
	buf.WriteByte('[')
	for _, name := range names {
		ok, err := match(ctx, m.networks[name])
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if buf.Len() > 1 {
			buf.WriteByte(',')
		}
		buf.Write(m.encoded[name])
	}
	buf.WriteByte(']')
	return buf.Bytes(), nil
}

// Remove removes a network.
func (m *Manager) Remove(ctx context.Context, nameOrID string, force bool, timeout *uint) error {
	ctx = context.WithoutCancel(ctx)
	n, err := m.Lookup(ctx, nameOrID)
	if err != nil {
		return err
	}
	if n.Name == m.defName {
		return fmt.Errorf("default network %s cannot be removed: %w", n.Name, core.ErrStateConflict)
	}
	if u := m.usersOrNil(); u != nil {
		ctrs, err := u.ContainersOnNetwork(ctx, n.Name)
		if err != nil {
			return err
		}
		if len(ctrs) > 0 && !force {
			return fmt.Errorf("%q has associated containers with it. Use -f to forcibly delete containers and pods: %w", n.Name, core.ErrNetworkInUse)
		}
		ids := make([]string, 0, len(ctrs))
		for id := range ctrs {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			if err := u.RemoveContainerForNetwork(ctx, id, timeout); err != nil && !errors.Is(err, core.ErrNoSuchContainer) {
				return err
			}
		}
	}
	m.setupMu.Lock()
	if err := m.dropKeeperLocked(ctx, n); err != nil {
		m.logger.Warn("tear down the keeper of a network", "network", n.Name, "err", err)
	}
	// Whatever state its containers' teardowns reached, the network's
	// bridge and rules go with it.
	if err := m.sweepLocked(ctx, n); err != nil {
		m.logger.Warn("remove what a cut teardown left of a network", "network", n.Name, "err", err)
	}
	if m.nv.binary != "" && n.Driver == Driver {
		if err := removeDNChain(ctx, n); err != nil {
			m.logger.Warn("remove the port forwarding chain of a network", "network", n.Name, "err", err)
		}
	}
	m.setupMu.Unlock()
	m.mu.Lock()
	if err := m.db.RemoveNetwork(ctx, n.ID); err != nil && !errors.Is(err, state.ErrNotFound) {
		m.mu.Unlock()
		return err
	}
	delete(m.networks, n.Name)
	delete(m.encoded, n.Name)
	m.listAll = nil
	m.mu.Unlock()
	m.emit(ctx, "remove", n, "", "")
	return nil
}

// Update adds and removes DNS servers of a network; running aardvark-dns
// instances learn them at once.
func (m *Manager) Update(ctx context.Context, nameOrID string, opts core.NetworkUpdateOptions) error {
	ctx = context.WithoutCancel(ctx)
	for _, s := range append(append([]string(nil), opts.AddDNSServers...), opts.RemoveDNSServers...) {
		if net.ParseIP(s) == nil {
			return core.InvalidArgument("adddnsservers", fmt.Errorf("%q is not an IP address", s))
		}
	}
	m.mu.Lock()
	n, err := m.lookupLocked(nameOrID)
	if err != nil {
		m.mu.Unlock()
		return err
	}
	if !n.DNSEnabled && len(opts.AddDNSServers) > 0 {
		m.mu.Unlock()
		return core.InvalidArgument("adddnsservers", fmt.Errorf("network %s has DNS disabled", n.Name))
	}
	next := copyNetwork(n)
	servers := []string{}
	for _, s := range n.NetworkDNSServers {
		if !containsIP(opts.RemoveDNSServers, s) {
			servers = append(servers, s)
		}
	}
	for _, s := range opts.AddDNSServers {
		if !containsIP(servers, s) {
			servers = append(servers, s)
		}
	}
	next.NetworkDNSServers = servers
	data, err := json.Marshal(next)
	if err != nil {
		m.mu.Unlock()
		return err
	}
	if err := m.db.Networks().Update(ctx, state.NetworkRecord{Name: next.Name, ID: next.ID, Data: data}); err != nil {
		m.mu.Unlock()
		return err
	}
	m.networks[next.Name] = next
	m.encoded[next.Name] = data
	m.listAll = nil
	m.mu.Unlock()
	return m.refreshDNS(ctx, next)
}

func containsIP(list []string, s string) bool {
	ip := net.ParseIP(s)
	for _, x := range list {
		if net.ParseIP(x).Equal(ip) {
			return true
		}
	}
	return false
}

// Connect attaches a container to a network.
func (m *Manager) Connect(ctx context.Context, nameOrID, container string, opts core.PerNetworkOptions) error {
	return m.changeMembership(ctx, nameOrID, container, "connect", func(ctx context.Context, u core.NetworkUsers, network string) (string, string, error) {
		return u.ConnectNetwork(ctx, container, network, opts)
	})
}

// Disconnect detaches a container from a network.
func (m *Manager) Disconnect(ctx context.Context, nameOrID, container string, force bool) error {
	return m.changeMembership(ctx, nameOrID, container, "disconnect", func(ctx context.Context, u core.NetworkUsers, network string) (string, string, error) {
		return u.DisconnectNetwork(ctx, container, network, force)
	})
}

// changeMembership connects or disconnects (action) a container through
// the container backend, which change asks, and reports the event.
func (m *Manager) changeMembership(ctx context.Context, nameOrID, container, action string, change func(ctx context.Context, u core.NetworkUsers, network string) (id, name string, err error)) error {
	n, err := m.Lookup(ctx, nameOrID)
	if err != nil {
		return err
	}
	u := m.usersOrNil()
	if u == nil {
		return fmt.Errorf("container %s: %w", container, core.ErrNoSuchContainer)
	}
	id, name, err := change(context.WithoutCancel(ctx), u, n.Name)
	if err != nil {
		return err
	}
	m.emit(ctx, action, n, id, name)
	return nil
}

// Prune removes unused networks matching filters; the default network stays.
func (m *Manager) Prune(ctx context.Context, filters map[string][]string) ([]*core.NetworkPruneReport, error) {
	ctx = context.WithoutCancel(ctx)
	match, err := m.compile(filters, "label", "label!", "until")
	if err != nil {
		return nil, err
	}
	nets, err := m.List(ctx, nil)
	if err != nil {
		return nil, err
	}
	out := []*core.NetworkPruneReport{}
	u := m.usersOrNil()
	for _, n := range nets {
		if n.Name == m.defName {
			continue
		}
		if ok, err := match(ctx, n); err != nil || !ok {
			if err != nil {
				return nil, err
			}
			continue
		}
		if u != nil {
			ctrs, err := u.ContainersOnNetwork(ctx, n.Name)
			if err != nil {
				return nil, err
			}
			if len(ctrs) > 0 {
				continue
			}
		}
		rep := &core.NetworkPruneReport{Name: n.Name}
		if err := m.Remove(ctx, n.Name, false, nil); err != nil {
			rep.Error = err.Error()
		}
		out = append(out, rep)
	}
	return out, nil
}
