package network

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/core"
)

// The chain name netavark 1.4 gave a network on this machine (network ID
// d8497b0a…, chain NETAVARK-DN-0D95600D66318 in "iptables -t nat -S").
func TestDNChainIsNetavarks(t *testing.T) {
	if got := dnChain("d8497b0a628550638132bd82bb4dd739ed5b846f4663c29dc5e26683e4386055"); got != "NETAVARK-DN-0D95600D66318" {
		t.Fatalf("dnChain = %s", got)
	}
}

func TestPortRulesOf(t *testing.T) {
	const me, other = "aaaa1111", "bbbb2222"
	one, two := dnChain("net-one"), dnChain("net-two")
	// A nat table as netavark leaves it: the container's rules on two
	// networks (on net-two only the SETMARK rules of a cut setup), another
	// container's on net-one with host port 9000 as well, and a port range.
	listing := strings.Join([]string{
		"-P PREROUTING ACCEPT",
		"-N NETAVARK-HOSTPORT-DNAT",
		"-N " + one,
		"-A PREROUTING -m addrtype --dst-type LOCAL -j NETAVARK-HOSTPORT-DNAT",
		`-A NETAVARK-HOSTPORT-DNAT -p tcp -m tcp --dport 8080 -m comment --comment "dnat name: net-one id: ` + me + `" -j ` + one,
		`-A NETAVARK-HOSTPORT-DNAT -p tcp -m tcp --dport 9000 -m comment --comment "dnat name: net-one id: ` + other + `" -j ` + one,
		`-A NETAVARK-HOSTPORT-DNAT -p udp -m udp --dport 7000:7002 -m comment --comment "dnat name: net-one id: ` + me + `" -j ` + one,
		"-A " + one + " -s 10.1.0.0/24 -d 127.0.0.1/32 -p tcp -m tcp --dport 8080 -j NETAVARK-HOSTPORT-SETMARK",
		"-A " + one + " -s 127.0.0.1/32 -d 127.0.0.1/32 -p tcp -m tcp --dport 8080 -j NETAVARK-HOSTPORT-SETMARK",
		"-A " + one + " -d 127.0.0.1/32 -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.1.0.5:80",
		"-A " + one + " -s 10.1.0.0/24 -p tcp -m tcp --dport 9000 -j NETAVARK-HOSTPORT-SETMARK",
		"-A " + one + " -p tcp -m tcp --dport 9000 -j DNAT --to-destination 10.1.0.6:90",
		"-A " + one + " -p udp -m udp --dport 7000:7002 -j DNAT --to-destination 10.1.0.5:7000-7002",
		"-A " + two + " -s 10.2.0.0/24 -p tcp -m tcp --dport 8080 -j NETAVARK-HOSTPORT-SETMARK",
		"-A " + two + " -s 127.0.0.1/32 -p tcp -m tcp --dport 8080 -j NETAVARK-HOSTPORT-SETMARK",
		// The same host port forwarded to another container on net-two:
		// its SETMARK rules stay.
		"-A " + two + " -p tcp -m tcp --dport 9000 -j DNAT --to-destination 10.2.0.9:90",
		"-A " + two + " -s 10.2.0.0/24 -p tcp -m tcp --dport 9000 -j NETAVARK-HOSTPORT-SETMARK",
		"",
	}, "\n")
	s := core.NetworkSetup{ContainerID: me, PortMappings: []core.PortMapping{
		{HostIP: "127.0.0.1", HostPort: 8080, ContainerPort: 80, Protocol: "tcp", Range: 1},
		{HostPort: 9000, ContainerPort: 90, Protocol: "tcp", Range: 1},
		{HostPort: 7000, ContainerPort: 7000, Protocol: "udp", Range: 3},
	}}
	nets := map[string]*core.Network{"one": {Name: "one", ID: "net-one"}, "two": {Name: "two", ID: "net-two"}}
	leased := map[string][]string{"net-one": {"10.1.0.5"}, "net-two": {"10.2.0.5"}}
	var got []string
	for _, r := range portRulesOf(listing, s, nets, leased) {
		got = append(got, strings.Join(r, " "))
	}
	want := []string{
		"-A NETAVARK-HOSTPORT-DNAT -p tcp -m tcp --dport 8080 -m comment --comment dnat name: net-one id: " + me + " -j " + one,
		"-A NETAVARK-HOSTPORT-DNAT -p udp -m udp --dport 7000:7002 -m comment --comment dnat name: net-one id: " + me + " -j " + one,
		"-A " + one + " -d 127.0.0.1/32 -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.1.0.5:80",
		"-A " + one + " -p udp -m udp --dport 7000:7002 -j DNAT --to-destination 10.1.0.5:7000-7002",
		"-A " + one + " -s 10.1.0.0/24 -d 127.0.0.1/32 -p tcp -m tcp --dport 8080 -j NETAVARK-HOSTPORT-SETMARK",
		"-A " + one + " -s 127.0.0.1/32 -d 127.0.0.1/32 -p tcp -m tcp --dport 8080 -j NETAVARK-HOSTPORT-SETMARK",
		"-A " + two + " -s 10.2.0.0/24 -p tcp -m tcp --dport 8080 -j NETAVARK-HOSTPORT-SETMARK",
		"-A " + two + " -s 127.0.0.1/32 -p tcp -m tcp --dport 8080 -j NETAVARK-HOSTPORT-SETMARK",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("portRulesOf:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The 9000 rules are the other container's (its address, or its port
	// forwarded on the network): none of them is picked.
	for _, r := range got {
		if strings.Contains(r, "9000") {
			t.Errorf("picked another container's rule: %s", r)
		}
	}
	if destinationAddr("[fd00::5]:80") != "fd00::5" || destinationAddr("10.1.0.5:80-82") != "10.1.0.5" {
		t.Error("destinationAddr")
	}
}

// TestChainRulesOf: a network's chain and the jumps to it are found in a
// nat table's listing; the chain's own rules and other chains' are not
// jumps to remove.
func TestChainRulesOf(t *testing.T) {
	listing := `-P PREROUTING ACCEPT
-N NETAVARK-DN-1111111111111
-N NETAVARK-DN-2222222222222
-N NETAVARK-HOSTPORT-DNAT
-A NETAVARK-HOSTPORT-DNAT -p tcp -m tcp --dport 8080 -m comment --comment "dnat name: first id: abc" -j NETAVARK-DN-1111111111111
-A NETAVARK-HOSTPORT-DNAT -p tcp -m tcp --dport 8081 -m comment --comment "dnat name: second id: def" -j NETAVARK-DN-2222222222222
-A NETAVARK-DN-1111111111111 -s 10.89.0.0/24 -p tcp -m tcp --dport 8080 -j NETAVARK-HOSTPORT-SETMARK
-A NETAVARK-DN-1111111111111 -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.89.0.2:80
`
	jumps, exists := chainRulesOf(listing, "NETAVARK-DN-1111111111111")
	if !exists || len(jumps) != 1 || jumps[0][1] != "NETAVARK-HOSTPORT-DNAT" || optionOf(jumps[0], "--dport") != "8080" || optionOf(jumps[0], "--comment") != "dnat name: first id: abc" {
		t.Fatalf("jumps %q, exists %v", jumps, exists)
	}
	if jumps, exists := chainRulesOf(listing, "NETAVARK-DN-3333333333333"); exists || len(jumps) != 0 {
		t.Fatalf("a chain that is not there: %q %v", jumps, exists)
	}
}

// TestInterfaceGone: netavark's words for a container interface missing
// from its namespace (netavark 1.4's, seen after engine crashes) are told
// from its other teardown failures.
func TestInterfaceGone(t *testing.T) {
	for msg, want := range map[string]bool{
		"netavark teardown: failed to delete container veth eth0: Netlink error: No such device (os error 19)":         true,
		"netavark teardown: failed to delete container veth eth1: Netlink error: No such device (os error 19)":         true,
		"netavark teardown: failed to delete container veth eth0: Netlink error: Operation not permitted (os error 1)": false,
		"netavark teardown: iptables: No chain/target/match by that name.":                                             false,
		"netavark teardown: get bridge interface: Netlink error: No such device (os error 19)":                         false,
	} {
		if got := interfaceGone(errors.New(msg)); got != want {
			t.Errorf("interfaceGone(%q) = %v, want %v", msg, got, want)
		}
	}
	if interfaceGone(nil) {
		t.Error("interfaceGone(nil) = true")
	}
}
