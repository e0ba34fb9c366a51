package network

import (
	"errors"
	"os"
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

// TestMacvlanParentFromTheDefaultRoute: without a parent a macvlan
// network takes the interface of the host's default route (lowest metric,
// up), as Podman does; without one it is a 400 saying so.
func TestMacvlanParentFromTheDefaultRoute(t *testing.T) {
	dir := t.TempDir()
	table := func(body string) string {
		p := dir + "/route"
		if err := os.WriteFile(p, []byte("Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"+body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct{ name, body, want, err string }{
		{"one default", "lo\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\nbr0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n", "lo", ""},
		{"lowest metric", "eth1\t00000000\t010200C0\t0003\t0\t0\t600\t00000000\t0\t0\t0\nlo\t00000000\t010200C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n", "lo", ""},
		{"down route", "eth1\t00000000\t010200C0\t0002\t0\t0\t0\t00000000\t0\t0\t0\n", "", "no default route"},
		{"no default", "br0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n", "", "no default route"},
	} {
		old := procNetRoute
		procNetRoute = table(tc.body)
		sub, _ := core.ParseIPNet("192.0.2.0/24")
		req := core.Network{Driver: "macvlan", Subnets: []core.Subnet{{Subnet: sub}}}
		err := checkDriver(&req)
		procNetRoute = old
		switch {
		case tc.err == "" && (err != nil || req.NetworkInterface != tc.want):
			t.Errorf("%s: %v, parent %q, want %q", tc.name, err, req.NetworkInterface, tc.want)
		case tc.err != "" && (err == nil || !errors.Is(err, core.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %v, want a 400 saying %q", tc.name, err, tc.err)
		}
	}
	if _, err := defaultRouteInterface(dir + "/nosuch"); err == nil {
		t.Error("a missing routing table reads")
	}
}
