package networksapi

import (
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
)

// poolSubnet answers the /24 at offset within the engine's subnet pool (a
// /20 unique to the test), its prefix ("10.x.y.") and its gateway.
func poolSubnet(te *testEngine, offset int) (subnet, prefix string) {
	block := strings.TrimSuffix(te.Nets.SubnetPool[0], ".0/20")
	parts := strings.Split(block, ".")
	var third int
	fmt.Sscan(parts[2], &third)
	prefix = fmt.Sprintf("%s.%s.%d.", parts[0], parts[1], third+offset)
	return prefix + "0/24", prefix
}

// parentLink creates a veth pair named after the test's bridge prefix (so
// the engine's leak check would see it) to be a macvlan parent; it goes at
// the end of the test. The kernels here have no dummy interfaces.
func parentLink(t *testing.T, te *testEngine) string {
	t.Helper()
	parent, peer := te.Nets.BridgePrefix+"mv0", te.Nets.BridgePrefix+"mv1"
	if out, err := exec.Command("ip", "link", "add", parent, "type", "veth", "peer", "name", peer).CombinedOutput(); err != nil {
		t.Fatalf("create the parent interface: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "link", "del", parent).Run() })
	for _, l := range []string{parent, peer} {
		if out, err := exec.Command("ip", "link", "set", l, "up").CombinedOutput(); err != nil {
			t.Fatalf("set %s up: %v %s", l, err, out)
		}
	}
	return parent
}

// TestMacvlanNetworks: macvlan networks through netavark, created by the
// podman 4.3.1 client (-d macvlan -o parent= -o mode=) and by the API
// (options.parent); the bad requests each refused with a 400 naming what is
// wrong (unknown parent or mode, ipvlan, DHCP, no subnet, published ports);
// real containers on the network with their static address, MAC and
// interface name, reaching each other over the parent; removal leaves no
// interface on the parent and no namespace behind.
func TestMacvlanNetworks(t *testing.T) {
	enginetest.RequirePodman(t)
	te := startEngine(t)
	parent := parentLink(t, te)
	subnet, prefix := poolSubnet(te, 5)

	te.MustPodman("network", "create", "-d", "macvlan", "-o", "parent="+parent, "-o", "mode=bridge", "--subnet", subnet, "mac1")
	var n network
	jsonOf(t, te.Must(http.StatusOK, "GET", "/networks/mac1/json", nil), &n)
	if n.Driver != "macvlan" || n.NetworkInterface != parent || n.Options["mode"] != "bridge" || n.DNSEnabled ||
		len(n.Subnets) != 1 || n.Subnets[0].Subnet != subnet || n.Subnets[0].Gateway != prefix+"1" {
		t.Fatalf("macvlan network: %+v", n)
	}
	// Docker's spelling of the parent, through the API.
	other, _ := poolSubnet(te, 6)
	var n2 network
	jsonOf(t, te.Must(http.StatusOK, "POST", "/networks/create", map[string]any{"name": "mac2", "driver": "macvlan",
		"options": map[string]string{"parent": parent}, "subnets": []map[string]string{{"subnet": other}}}), &n2)
	if n2.NetworkInterface != parent || len(n2.Options) != 0 {
		t.Fatalf("macvlan network from options.parent: %+v", n2)
	}
	te.Must(http.StatusOK, "DELETE", "/networks/mac2", nil)
	// Without a parent, the interface of the host's default route, as
	// Podman picks it (only the network is made: no interface on it).
	if route, _ := exec.Command("ip", "-4", "route", "show", "default").Output(); len(strings.Fields(string(route))) > 4 {
		f := strings.Fields(string(route))
		dev := ""
		for i := range f[:len(f)-1] {
			if f[i] == "dev" && dev == "" {
				dev = f[i+1]
			}
		}
		var n3 network
		jsonOf(t, te.Must(http.StatusOK, "POST", "/networks/create", map[string]any{"name": "mac3", "driver": "macvlan",
			"subnets": []map[string]string{{"subnet": other}}}), &n3)
		if n3.NetworkInterface != dev {
			t.Fatalf("macvlan network without a parent is on %q, the default route is on %q", n3.NetworkInterface, dev)
		}
		te.Must(http.StatusOK, "DELETE", "/networks/mac3", nil)
	}

	for _, tc := range []struct {
		name string
		body map[string]any
		want string
	}{
		{"unknown parent", map[string]any{"driver": "macvlan", "network_interface": "nosuchlink0", "subnets": []map[string]string{{"subnet": other}}}, "parent interface nosuchlink0 does not exist"},
		{"unknown mode", map[string]any{"driver": "macvlan", "options": map[string]string{"parent": parent, "mode": "sideways"}, "subnets": []map[string]string{{"subnet": other}}}, `unknown macvlan mode \"sideways\"`},
		{"bridge option", map[string]any{"driver": "macvlan", "options": map[string]string{"parent": parent, "isolate": "true"}, "subnets": []map[string]string{{"subnet": other}}}, "isolate"},
		{"no subnet", map[string]any{"driver": "macvlan", "options": map[string]string{"parent": parent}}, "at least one subnet"},
		{"dhcp", map[string]any{"driver": "macvlan", "options": map[string]string{"parent": parent}, "ipam_options": map[string]string{"driver": "dhcp"}}, "dhcp"},
		{"ipvlan", map[string]any{"driver": "ipvlan", "options": map[string]string{"parent": parent}, "subnets": []map[string]string{{"subnet": other}}}, "ipvlan"},
		{"unknown driver", map[string]any{"driver": "overlay"}, "overlay"},
	} {
		tc.body["name"] = "badmac"
		status, body := te.Do("POST", "/networks/create", tc.body)
		if status != http.StatusBadRequest || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s: %d %s, want 400 naming %q", tc.name, status, body, tc.want)
		}
	}
	if out, err := te.Podman("network", "create", "-d", "macvlan", "-o", "parent="+parent, "-o", "mode=sideways", "--subnet", other, "badmac"); err == nil || !strings.Contains(out, "sideways") {
		t.Fatalf("podman network create with an unknown mode: %v %s", err, out)
	}
	te.Must(http.StatusNotFound, "GET", "/networks/badmac/json", nil)

	// A container with a static address, MAC and interface name.
	te.MustPodman("run", "-d", "--name", "m1", "--network", "mac1:ip="+prefix+"20,mac=02:00:00:00:05:20,interface_name=mv7",
		"localhost/busybox", "sleep", "300")
	if out := te.MustPodman("exec", "m1", "ip", "addr", "show", "mv7"); !strings.Contains(out, "inet "+prefix+"20/24") || !strings.Contains(out, "02:00:00:00:05:20") {
		t.Fatalf("m1's interface: %s", out)
	}
	sandbox := strings.TrimSpace(te.MustPodman("inspect", "m1", "--format", "{{.NetworkSettings.SandboxKey}}"))
	if out, err := exec.Command("nsenter", "--net="+sandbox, "ip", "-d", "link", "show", "mv7").CombinedOutput(); err != nil || !strings.Contains(string(out), "macvlan mode bridge") {
		t.Fatalf("m1's interface is not a macvlan in bridge mode: %v %s", err, out)
	}
	if out := te.MustPodman("run", "--rm", "--cap-add", "NET_RAW", "--network", "mac1", "localhost/busybox", "ping", "-c", "1", "-W", "5", prefix+"20"); !strings.Contains(out, "1 packets received") {
		t.Fatalf("ping m1 over the parent: %s", out)
	}
	// The address is taken; ports cannot be published on macvlan.
	if out, err := te.Podman("run", "--rm", "--network", "mac1:ip="+prefix+"20", "localhost/busybox", "true"); err == nil || !strings.Contains(out, "already in use") {
		t.Fatalf("a second container on m1's address: %v %s", err, out)
	}
	if out, err := te.Podman("run", "--rm", "--network", "mac1", "-p", "8080:80", "localhost/busybox", "true"); err == nil || !strings.Contains(out, "portmappings") {
		t.Fatalf("a published port on macvlan: %v %s", err, out)
	}

	te.MustPodman("network", "rm", "-f", "mac1")
	out, _ := exec.Command("ip", "-o", "link", "show").Output()
	for _, line := range strings.Split(string(out), "\n") {
		// The parent's veth peer is the only link on it that may stay.
		if strings.Contains(line, "@"+parent+":") && !strings.Contains(line, " "+te.Nets.BridgePrefix+"mv1@") {
			t.Errorf("an interface on the parent is left: %s", line)
		}
	}
	// Start's cleanup, after the parent's, checks that nothing else of the
	// test's networks is left.
}
