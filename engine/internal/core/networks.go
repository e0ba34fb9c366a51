package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// Network errors (see errors.go for the mapping rules).
var (
	// ErrNoSuchNetwork: no network has the given name or ID (404).
	ErrNoSuchNetwork = errors.New("network not found")
	// ErrNetworkInUse: containers use the network; removal needs force (409).
	ErrNetworkInUse = errors.New("network is being used")
	// ErrSubnetInUse: a requested subnet overlaps another network or a host route (409).
	ErrSubnetInUse = errors.New("subnet is already used")
	// ErrAddressInUse: a requested static address or host port is taken (409).
	ErrAddressInUse = errors.New("address is already in use")
	// ErrNetworkExists: a network of the requested name exists (409). It is
	// an ErrNameInUse in Podman's words, which its clients match on.
	ErrNetworkExists error = nameInUseError("network already exists")
)

// IPNet is a subnet in CIDR notation on the wire ("10.88.0.0/16").
type IPNet struct {
	net.IPNet
}

// ParseIPNet reads a CIDR. The address is kept as written (an interface's
// address in its subnet), IPv4 in its 4-byte form.
func ParseIPNet(cidr string) (IPNet, error) {
	ip, n, err := net.ParseCIDR(cidr)
	if err != nil {
		return IPNet{}, err
	}
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	n.IP = ip
	return IPNet{*n}, nil
}

// MarshalText writes the CIDR.
func (n IPNet) MarshalText() ([]byte, error) { return []byte(n.String()), nil }

// UnmarshalText reads a CIDR.
func (n *IPNet) UnmarshalText(text []byte) error {
	p, err := ParseIPNet(string(text))
	if err != nil {
		return fmt.Errorf("subnet %q is not in CIDR notation (ADDRESS/PREFIX)", text)
	}
	*n = p
	return nil
}

// HardwareAddr is a MAC address; it is written as a string and read from a
// string or, as Podman clients may send it, a byte array.
type HardwareAddr net.HardwareAddr

// String formats the address as aa:bb:cc:dd:ee:ff.
func (h HardwareAddr) String() string { return net.HardwareAddr(h).String() }

// MarshalText writes the address as a string.
func (h HardwareAddr) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalJSON reads "aa:bb:..." or a JSON array of bytes (Go's []byte
// encoding, base64).
func (h *HardwareAddr) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		if s == "" {
			*h = nil
			return nil
		}
		if mac, err := net.ParseMAC(s); err == nil {
			*h = HardwareAddr(mac)
			return nil
		}
		var raw []byte
		if err := json.Unmarshal(data, &raw); err == nil && len(raw) == 6 {
			*h = HardwareAddr(raw)
			return nil
		}
		return fmt.Errorf("%q is not a MAC address", s)
	}
	var raw []byte
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("not a MAC address: %w", err)
	}
	*h = HardwareAddr(raw)
	return nil
}

// LeaseRange limits the addresses handed out in a subnet.
type LeaseRange struct {
	StartIP net.IP `json:"start_ip,omitempty"`
	EndIP   net.IP `json:"end_ip,omitempty"`
}

// Subnet is one subnet of a network.
type Subnet struct {
	Subnet     IPNet       `json:"subnet"`
	Gateway    net.IP      `json:"gateway,omitempty"`
	LeaseRange *LeaseRange `json:"lease_range,omitempty"`
}

// Network is a network as Podman's libpod API describes it (netavark's
// configuration format).
type Network struct {
	Name              string            `json:"name"`
	ID                string            `json:"id"`
	Driver            string            `json:"driver"`
	NetworkInterface  string            `json:"network_interface,omitempty"`
	Created           time.Time         `json:"created,omitempty"`
	Subnets           []Subnet          `json:"subnets,omitempty"`
	IPv6Enabled       bool              `json:"ipv6_enabled"`
	Internal          bool              `json:"internal"`
	DNSEnabled        bool              `json:"dns_enabled"`
	NetworkDNSServers []string          `json:"network_dns_servers,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	Options           map[string]string `json:"options,omitempty"`
	IPAMOptions       map[string]string `json:"ipam_options,omitempty"`
	// Docker is what a Docker API client asked for, kept for Docker's
	// inspect: nil for networks made through the libpod API.
	Docker *DockerNetworkRequest `json:"docker,omitempty"`
}

// DockerNetworkRequest is what a Docker API client set on a network that
// the network itself does not hold as Docker names it. dockerd's inspect
// lists a network's options as its client gave them (a bridge name it
// chose itself is not among them), and Compose v1 compares them with its
// file's before it reuses the network.
type DockerNetworkRequest struct {
	Options map[string]string `json:"options,omitempty"`
	// Attachable only restricts swarm-scoped networks; every network of
	// the engine is local, open to any container, as dockerd's are.
	Attachable bool `json:"attachable,omitempty"`
}

// NetworkContainer is one container attached to a network, as inspect
// reports it (Podman 5's NetworkContainerInfo).
type NetworkContainer struct {
	Name       string                  `json:"name"`
	Interfaces map[string]NetInterface `json:"interfaces,omitempty"`
}

// NetworkInspect is a network with the containers attached to it.
type NetworkInspect struct {
	Network
	Containers map[string]NetworkContainer `json:"containers"`
}

// PerNetworkOptions is how a container joins one network.
type PerNetworkOptions struct {
	StaticIPs     []net.IP     `json:"static_ips,omitempty"`
	Aliases       []string     `json:"aliases,omitempty"`
	StaticMAC     HardwareAddr `json:"static_mac,omitempty"`
	InterfaceName string       `json:"interface_name"`
	// Links are the legacy links a Docker client gives with a connect
	// (Compose v1 repeats its links for each network): they join the
	// container's own (ContainerSpec.Links), not the network's.
	Links []ContainerLink `json:"-"`
}

// PortMapping publishes container ports on the host. HostPort 0 asks the
// engine for a free port; Range > 1 maps that many consecutive ports.
type PortMapping struct {
	HostIP        string `json:"host_ip"`
	ContainerPort uint16 `json:"container_port"`
	HostPort      uint16 `json:"host_port"`
	Range         uint16 `json:"range"`
	Protocol      string `json:"protocol"`
}

// HostPortError: a host port a container publishes could not be bound
// when it started (something else listens there, or the address is not the
// host's). The engine holds each published port open while the container
// runs, as Podman does, so that neither another container nor a host
// process takes it; the start fails instead (500, in Podman's words).
type HostPortError struct {
	// Protocol is "tcp" or "udp"; Address is what the bind named
	// (":8080" for every IPv4 address, "127.0.0.1:8080", "[::1]:8080").
	Protocol, Address string
	Err               error
}

func (e *HostPortError) Error() string {
	return fmt.Sprintf("cannot listen on the %s port: %v", strings.ToUpper(e.Protocol), e.Err)
}

func (e *HostPortError) Unwrap() error { return e.Err }

// NetAddress is one address of a container's interface.
type NetAddress struct {
	IPNet   IPNet  `json:"ipnet"`
	Gateway net.IP `json:"gateway,omitempty"`
}

// NetInterface is one interface of a container on a network.
type NetInterface struct {
	Subnets    []NetAddress `json:"subnets,omitempty"`
	MacAddress HardwareAddr `json:"mac_address"`
}

// StatusBlock is what netavark reports for one network of a container.
type StatusBlock struct {
	Interfaces       map[string]NetInterface `json:"interfaces,omitempty"`
	DNSServerIPs     []net.IP                `json:"dns_server_ips,omitempty"`
	DNSSearchDomains []string                `json:"dns_search_domains,omitempty"`
}

// NetworkUpdateOptions changes a network (Podman 5's UpdateNetwork body).
type NetworkUpdateOptions struct {
	AddDNSServers    []string `json:"adddnsservers"`
	RemoveDNSServers []string `json:"removednsservers"`
}

// NetworkRemoveReport is one entry of RemoveNetwork's answer.
type NetworkRemoveReport struct {
	Name string
	Err  *string
}

// Networks is the network domain of the engine. Every nameOrID accepts a
// full name, a full ID or a unique ID prefix.
type Networks interface {
	// Create creates a network; ErrNetworkExists when the name is taken, unless
	// ignoreIfExists, which answers the existing network.
	Create(ctx context.Context, req Network, ignoreIfExists bool) (*Network, error)
	// Inspect returns a network and the containers attached to it.
	Inspect(ctx context.Context, nameOrID string) (*NetworkInspect, error)
	// List returns the networks matching filters (name, id, driver, label,
	// label!, until, dangling), sorted by name.
	List(ctx context.Context, filters map[string][]string) ([]*Network, error)
	// Remove removes a network; one in use only with force, which removes
	// its containers first (stopping them within timeout seconds).
	Remove(ctx context.Context, nameOrID string, force bool, timeout *uint) error
	// Update adds and removes the network's DNS servers.
	Update(ctx context.Context, nameOrID string, opts NetworkUpdateOptions) error
	// Connect attaches a container to a network (live when it runs).
	Connect(ctx context.Context, nameOrID, container string, opts PerNetworkOptions) error
	// Disconnect detaches a container from a network.
	Disconnect(ctx context.Context, nameOrID, container string, force bool) error
	// Prune removes the networks no container uses that match filters
	// (label, label!, until); the default network stays.
	Prune(ctx context.Context, filters map[string][]string) ([]*NetworkPruneReport, error)
}

// Network namespace modes beyond none, host and private.
const (
	// NetNSBridge puts the container on networks (the default network
	// when the spec names none).
	NetNSBridge = "bridge"
	// NetNSPath joins the namespace bind-mounted at Value.
	NetNSPath = "path"
	// NetNSContainer joins the namespace of the container named in Value.
	NetNSContainer = "container"
)

// NetworkSetup is one container's network namespace as the network backend
// sets it up: the networks it joins and the ports it publishes.
type NetworkSetup struct {
	ContainerID   string
	ContainerName string
	// NetNSPath is the namespace file the container's processes join.
	NetNSPath string
	// Networks maps a network name to how the container joins it; StaticIPs
	// hold the addresses allocated to it.
	Networks     map[string]PerNetworkOptions
	PortMappings []PortMapping
	// DNSServers are the container's own DNS servers (--dns), which
	// aardvark-dns forwards to.
	DNSServers []string
	// AdoptNetNS, where set, is a namespace that exists already (a
	// user-namespaced container's, which the runtime created inside its
	// user namespace): the setup binds it at NetNSPath instead of creating
	// one. It is not kept: teardown is the same either way.
	AdoptNetNS string `json:"-"`
}

// ContainerNetworking is what the container backend needs from the network
// backend: resolving a container's network request at create, and the
// namespace's plumbing at start and stop.
type ContainerNetworking interface {
	// Resolve checks the networks and options a container asks for and
	// fills in what the request leaves open (the default network,
	// interface names); it answers the networks to join.
	Resolve(ctx context.Context, requested map[string]PerNetworkOptions) (map[string]PerNetworkOptions, error)
	// Setup creates the namespace at s.NetNSPath, allocates addresses and
	// runs netavark; it answers each network's status and the setup as
	// performed (with the allocated addresses), which Teardown needs.
	Setup(ctx context.Context, s NetworkSetup) (NetworkSetup, map[string]StatusBlock, error)
	// Teardown undoes Setup (netavark, addresses, namespace file). It is
	// idempotent and tolerates networks removed since.
	Teardown(ctx context.Context, s NetworkSetup) error
	// Attach joins a set-up namespace to one more network; Detach leaves it.
	Attach(ctx context.Context, s NetworkSetup, network string, opts PerNetworkOptions) (PerNetworkOptions, StatusBlock, error)
	Detach(ctx context.Context, s NetworkSetup, network string) error
	// Lookup returns a network by name or ID.
	Lookup(ctx context.Context, nameOrID string) (*Network, error)
	// NetNSPath is where a container's namespace file lives.
	NetNSPath(containerID string) string
	// DefaultNetwork names the network of a container that names none.
	DefaultNetwork() string
}

// NetworkUsers is what the network backend needs from the container backend.
type NetworkUsers interface {
	// ContainersOnNetwork maps the IDs of the containers attached to the
	// network to their names and interfaces.
	ContainersOnNetwork(ctx context.Context, name string) (map[string]NetworkContainer, error)
	// RemoveContainerForNetwork stops (within timeout) and removes a container.
	RemoveContainerForNetwork(ctx context.Context, containerID string, timeout *uint) error
	// ConnectNetwork and DisconnectNetwork change a container's networks;
	// they answer the container's ID and name.
	ConnectNetwork(ctx context.Context, container, network string, opts PerNetworkOptions) (id, name string, err error)
	DisconnectNetwork(ctx context.Context, container, network string, force bool) (id, name string, err error)
}

// NameInterfaces names the interfaces of the networks in order that have
// none: eth0, eth1 ... skipping the names in used, which it extends.
func NameInterfaces(nets map[string]PerNetworkOptions, order []string, used map[string]bool) {
	next := 0
	for _, name := range order {
		o := nets[name]
		if o.InterfaceName != "" {
			continue
		}
		for used[fmt.Sprintf("eth%d", next)] {
			next++
		}
		o.InterfaceName = fmt.Sprintf("eth%d", next)
		used[o.InterfaceName] = true
		nets[name] = o
	}
}
