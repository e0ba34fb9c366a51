package network

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/berth-project/berth/engine/internal/core"
)

// Network drivers besides the bridge. A macvlan network gives each
// container an interface of its own on a host interface (the parent),
// with its own MAC address, on the parent's link: netavark 1.4 creates it
// in the container's namespace, so nothing of it stays on the host when
// the namespace goes.
const (
	DriverMacvlan = "macvlan"
	// DriverIPvlan is refused: netavark 1.4 answers "unknown network
	// driver ipvlan" (the driver arrived in netavark 1.6), and the kernels
	// this engine is tested on are built without ipvlan.
	DriverIPvlan = "ipvlan"
)

// macvlanModes are the kernel's macvlan modes; empty is netavark's default
// (bridge).
var macvlanModes = map[string]bool{"": true, "bridge": true, "private": true, "vepa": true, "passthru": true}

// checkDriver validates the driver of a network to create and what depends
// on it; a macvlan network's parent moves from options.parent (Docker's
// spelling, which curl users send) to network_interface (Podman's client
// sends it there).
func checkDriver(req *core.Network) error {
	switch req.Driver {
	case "":
		req.Driver = Driver
		return checkOptions(req)
	case Driver:
		return checkOptions(req)
	case DriverMacvlan:
		return checkMacvlan(req)
	case DriverIPvlan:
		return core.InvalidArgument("driver", errors.New("ipvlan is not supported here: this netavark (1.4) has no ipvlan driver (netavark 1.6 added it) and this kernel has no ipvlan"))
	default:
		return core.InvalidArgument("driver", fmt.Errorf("%q is not supported (bridge, macvlan)", req.Driver))
	}
}

// checkMacvlan validates a macvlan network as netavark 1.4 can set it up:
// an existing parent, a known mode, subnets for the engine's address
// management (netavark 1.4 has no DHCP proxy), no DNS (netavark serves
// none on macvlan; Podman turns it off the same way).
func checkMacvlan(req *core.Network) error {
	if parent, ok := req.Options["parent"]; ok {
		if req.NetworkInterface != "" && req.NetworkInterface != parent {
			return core.InvalidArgument("options", fmt.Errorf("parent=%q differs from network_interface %q", parent, req.NetworkInterface))
		}
		req.NetworkInterface = parent
		delete(req.Options, "parent")
	}
	if req.NetworkInterface == "" {
		// Podman's default: the interface of the host's default route,
		// resolved once here so that inspect shows the parent used.
		iface, err := defaultRouteInterface(procNetRoute)
		if err != nil {
			return core.InvalidArgument("options", fmt.Errorf("no parent interface given (options parent=IFACE, or network_interface) and %v", err))
		}
		req.NetworkInterface = iface
	}
	if !validBridge.MatchString(req.NetworkInterface) {
		return core.InvalidArgument("network_interface", fmt.Errorf("%q is not a valid interface name", req.NetworkInterface))
	}
	if _, err := net.InterfaceByName(req.NetworkInterface); err != nil {
		return core.InvalidArgument("options", fmt.Errorf("parent interface %s does not exist", req.NetworkInterface))
	}
	for k, v := range req.Options {
		switch k {
		case "mode":
			if !macvlanModes[v] {
				return core.InvalidArgument("options", fmt.Errorf("unknown macvlan mode %q (bridge, private, vepa, passthru)", v))
			}
		case "mtu":
			if err := checkNumberOption(k, v); err != nil {
				return err
			}
		default:
			return core.InvalidArgument("options", fmt.Errorf("%q is not a macvlan option (parent, mode, mtu)", k))
		}
	}
	switch v, err := ipamDriver(req); {
	case err != nil:
		return err
	case v == "dhcp":
		return core.InvalidArgument("ipam_options", errors.New("the dhcp IPAM driver needs netavark's DHCP proxy (netavark 1.5 and later); this netavark is 1.4: give the network a subnet"))
	case v != "" && v != "host-local":
		return core.InvalidArgument("ipam_options", fmt.Errorf("driver %q is not supported with macvlan (host-local)", v))
	}
	if len(req.Subnets) == 0 {
		return core.InvalidArgument("subnets", errors.New("a macvlan network needs at least one subnet (DHCP is not supported with netavark 1.4)"))
	}
	if req.Internal {
		return core.InvalidArgument("internal", errors.New("a macvlan network is on its parent's link; it cannot be internal"))
	}
	req.DNSEnabled = false
	if len(req.NetworkDNSServers) > 0 {
		return core.InvalidArgument("network_dns_servers", errors.New("a macvlan network has no DNS server of the engine's to forward to them"))
	}
	return nil
}

// procNetRoute is the kernel's IPv4 routing table; a variable for tests.
var procNetRoute = "/proc/net/route"

// defaultRouteInterface is the interface of the IPv4 default route with
// the lowest metric in a /proc/net/route table (columns Iface,
// Destination, Gateway, Flags, RefCnt, Use, Metric, Mask, ...; addresses
// in hex): destination and mask 0, the route up (flag 0x1).
func defaultRouteInterface(table string) (string, error) {
	f, err := os.Open(table)
	if err != nil {
		return "", fmt.Errorf("the routing table cannot be read: %w", err)
	}
	defer f.Close()
	best, bestMetric := "", uint64(0)
	sc := bufio.NewScanner(f)
	for first := true; sc.Scan(); first = false {
		fields := strings.Fields(sc.Text())
		if first || len(fields) < 8 || fields[1] != "00000000" || fields[7] != "00000000" {
			continue
		}
		flags, err1 := strconv.ParseUint(fields[3], 16, 32)
		metric, err2 := strconv.ParseUint(fields[6], 10, 32)
		if err1 != nil || err2 != nil || flags&0x1 == 0 {
			continue
		}
		if best == "" || metric < bestMetric {
			best, bestMetric = fields[0], metric
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("the routing table cannot be read: %w", err)
	}
	if best == "" {
		return "", errors.New("the host has no default route to take the parent from")
	}
	return best, nil
}
