package network

import (
	"errors"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/core"
)

// TestCheckDriver: the driver checks of network create, with lo as the
// macvlan parent that exists everywhere.
func TestCheckDriver(t *testing.T) {
	sub, _ := core.ParseIPNet("192.0.2.0/24")
	subnets := []core.Subnet{{Subnet: sub}}
	for _, tc := range []struct {
		name string
		req  core.Network
		want string // "" for accepted
	}{
		{"bridge by default", core.Network{}, ""},
		{"macvlan with options.parent", core.Network{Driver: "macvlan", Options: map[string]string{"parent": "lo", "mode": "vepa"}, Subnets: subnets}, ""},
		{"macvlan with network_interface", core.Network{Driver: "macvlan", NetworkInterface: "lo", Subnets: subnets, DNSEnabled: true}, ""},
		{"parents differ", core.Network{Driver: "macvlan", NetworkInterface: "lo", Options: map[string]string{"parent": "eth9"}, Subnets: subnets}, "differs"},
		{"no parent", core.Network{Driver: "macvlan", Subnets: subnets}, "parent"},
		{"missing parent", core.Network{Driver: "macvlan", NetworkInterface: "nosuch0", Subnets: subnets}, "parent interface nosuch0 does not exist"},
		{"bad mode", core.Network{Driver: "macvlan", NetworkInterface: "lo", Options: map[string]string{"mode": "l2"}, Subnets: subnets}, `unknown macvlan mode "l2"`},
		{"bad mtu", core.Network{Driver: "macvlan", NetworkInterface: "lo", Options: map[string]string{"mtu": "x"}, Subnets: subnets}, "mtu"},
		{"bridge option", core.Network{Driver: "macvlan", NetworkInterface: "lo", Options: map[string]string{"isolate": "true"}, Subnets: subnets}, "not a macvlan option"},
		{"no subnet", core.Network{Driver: "macvlan", NetworkInterface: "lo"}, "subnet"},
		{"dhcp", core.Network{Driver: "macvlan", NetworkInterface: "lo", IPAMOptions: map[string]string{"driver": "dhcp"}, Subnets: subnets}, "dhcp"},
		{"internal", core.Network{Driver: "macvlan", NetworkInterface: "lo", Internal: true, Subnets: subnets}, "internal"},
		{"dns servers", core.Network{Driver: "macvlan", NetworkInterface: "lo", NetworkDNSServers: []string{"192.0.2.53"}, Subnets: subnets}, "network_dns_servers"},
		{"ipvlan", core.Network{Driver: "ipvlan", NetworkInterface: "lo", Subnets: subnets}, "netavark"},
		{"other driver", core.Network{Driver: "overlay"}, `"overlay"`},
	} {
		req := tc.req
		err := checkDriver(&req)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !errors.Is(err, core.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want a 400 naming %q", tc.name, err, tc.want)
		}
		if tc.want == "" && req.Driver == DriverMacvlan && (req.NetworkInterface != "lo" || req.DNSEnabled || req.Options["parent"] != "") {
			t.Errorf("%s: normalised to %+v", tc.name, req)
		}
	}
}
