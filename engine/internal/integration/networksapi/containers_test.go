package networksapi

import (
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/poll"
	"github.com/berth-project/berth/shared/testnet"
)

// TestContainersTalk runs real containers on real networks: the default
// network, name and alias resolution through aardvark-dns (and none across
// networks), a published port reached on 127.0.0.1, -P, live connect and
// disconnect, the other network modes, restart, and removal of a network
// in use. The cleanup checks that no interface, rule or namespace remains.
func TestContainersTalk(t *testing.T) {
	// Registered first, so run last, after the engine's stop: netavark's
	// port forwarding chain of the default network is gone with the -P
	// container. It stayed, empty, when the keeper's teardown (without
	// ports) was the network's last.
	var chain string
	t.Cleanup(func() {
		if nat, _ := exec.Command("iptables", "-w", "-t", "nat", "-S").Output(); chain != "" && strings.Contains(string(nat), chain) {
			exec.Command("iptables", "-w", "-t", "nat", "-X", chain).Run()
			t.Errorf("the default network's port forwarding chain %s is left after the engine's stop", chain)
		}
	})
	te := startEngine(t)
	var def struct {
		ID string `json:"id"`
	}
	jsonOf(t, te.Must(http.StatusOK, "GET", "/networks/"+te.Nets.DefaultNetwork+"/json", nil), &def)
	sum := sha512.Sum512([]byte(def.ID))
	chain = "NETAVARK-DN-" + strings.ToUpper(hex.EncodeToString(sum[:]))[:13]

	// The default network, without any network in the request.
	plain := te.Run(map[string]any{"name": "plain", "command": []string{"sleep", "300"}})
	ns := te.networkSettings(plain)
	if ns.IPAddress == "" || ns.Gateway == "" || ns.MacAddress == "" || ns.Networks[te.Nets.DefaultNetwork].IPAddress != ns.IPAddress {
		t.Fatalf("default network settings: %+v", ns)
	}
	if _, subnet, _ := net.ParseCIDR(te.Nets.DefaultSubnet); !subnet.Contains(net.ParseIP(ns.IPAddress)) {
		t.Fatalf("address %s outside the default subnet %s", ns.IPAddress, te.Nets.DefaultSubnet)
	}
	if _, err := os.Stat(ns.SandboxKey); err != nil {
		t.Fatalf("namespace file: %v", err)
	}
	// Containers on the default network (the engine plumbs them without
	// netavark, see docs/engine/networks.md) reach each other and the gateway.
	peer := te.Run(map[string]any{"name": "peer", "command": []string{"sleep", "300"}, "cap_add": []string{"NET_RAW"}})
	for _, addr := range []string{ns.IPAddress, ns.Gateway} {
		if code, out := te.exec(peer, "ping", "-c", "1", "-W", "5", addr); code != 0 {
			t.Fatalf("ping %s from another container on the default network: %d %s", addr, code, out)
		}
	}
	te.Must(http.StatusOK, "DELETE", "/containers/peer?force=true&timeout=0", nil)

	te.Must(http.StatusOK, "POST", "/networks/create", map[string]any{"name": "dnsa", "dns_enabled": true})
	te.Must(http.StatusOK, "POST", "/networks/create", map[string]any{"name": "dnsb", "dns_enabled": true})

	port := testnet.FreePort(t)
	srv := te.Run(map[string]any{
		"name": "srv", "command": []string{"httpd", "-f", "-p", "80", "-h", "/etc"},
		"netns":        map[string]string{"nsmode": "bridge"},
		"Networks":     map[string]any{"dnsa": map[string]any{"aliases": []string{"web"}}},
		"portmappings": []map[string]any{{"host_ip": "127.0.0.1", "host_port": port, "container_port": 80, "protocol": "tcp"}},
	})
	var body string
	poll.Until(t, 20*time.Second, "the published port answering", func() bool {
		body = poll.Get(fmt.Sprintf("http://127.0.0.1:%d/hostname", port))
		return body != ""
	})
	if strings.TrimSpace(body) != srv[:12] {
		t.Fatalf("published port answered %q, want the container's hostname %s", body, srv[:12])
	}

	// busybox's ping needs a raw socket.
	cli := te.Run(map[string]any{"name": "cli", "command": []string{"sleep", "300"}, "cap_add": []string{"NET_RAW"},
		"netns": map[string]string{"nsmode": "bridge"}, "Networks": map[string]any{"dnsa": map[string]any{}}})
	for _, name := range []string{"srv", "web"} {
		if code, out := te.exec(cli, "nslookup", name); code != 0 {
			t.Fatalf("nslookup %s on the same network: %d %s", name, code, out)
		}
	}
	if code, out := te.exec(cli, "ping", "-c", "1", "-W", "5", "srv"); code != 0 {
		t.Fatalf("ping srv: %d %s", code, out)
	}
	if code, out := te.exec(cli, "wget", "-q", "-O", "-", "http://web/hostname"); code != 0 || strings.TrimSpace(out) != srv[:12] {
		t.Fatalf("wget web: %d %q", code, out)
	}

	// The traffic shows in the container's network stats.
	var stats struct {
		Stats []struct{ NetInput, NetOutput uint64 }
	}
	jsonOf(t, te.Must(http.StatusOK, "GET", "/containers/stats?stream=false&containers=cli", nil), &stats)
	if len(stats.Stats) != 1 || stats.Stats[0].NetInput == 0 || stats.Stats[0].NetOutput == 0 {
		t.Fatalf("network stats of cli: %+v", stats)
	}

	other := te.Run(map[string]any{"name": "other", "command": []string{"sleep", "300"},
		"Networks": map[string]any{"dnsb": map[string]any{}}})
	if code, _ := te.exec(other, "nslookup", "srv"); code == 0 {
		t.Fatal("a container on another network resolved srv")
	}

	// Live connect: the interface appears, names resolve; disconnect removes it.
	te.Must(http.StatusOK, "POST", "/networks/dnsa/connect", map[string]any{"container": "other", "aliases": []string{"oth"}})
	if code, out := te.exec(other, "ip", "link", "show", "eth1"); code != 0 {
		t.Fatalf("eth1 after connect: %d %s", code, out)
	}
	// aardvark-dns learns of the new member when it has reloaded; cli, which
	// talked to the gateway before, must still reach it (the bridge keeps its
	// address when the new port joins).
	for _, check := range []struct {
		what    string
		in, ask string
	}{
		{"cli resolving the alias of a connected container", cli, "oth"},
		{"the connected container resolving srv", other, "srv"},
	} {
		poll.Until(t, 10*time.Second, check.what, func() bool { code, _ := te.exec(check.in, "nslookup", check.ask); return code == 0 })
	}
	te.Must(http.StatusConflict, "POST", "/networks/dnsa/connect", map[string]any{"container": "other"})
	te.Must(http.StatusOK, "POST", "/networks/dnsa/disconnect", map[string]any{"Container": "other"})
	if code, _ := te.exec(other, "ip", "link", "show", "eth1"); code == 0 {
		t.Fatal("eth1 still there after disconnect")
	}
	te.Must(http.StatusNotFound, "POST", "/networks/dnsa/disconnect", map[string]any{"Container": "other"})

	// Inspect of the network lists its containers.
	var dnsa network
	jsonOf(t, te.Must(http.StatusOK, "GET", "/networks/dnsa/json", nil), &dnsa)
	if len(dnsa.Containers) != 2 || dnsa.Containers[srv].Name != "srv" {
		t.Fatalf("containers of dnsa: %+v", dnsa.Containers)
	}

	// -P publishes the image's EXPOSE 80 on a random host port.
	all := te.Run(map[string]any{"name": "all", "command": []string{"httpd", "-f", "-p", "80", "-h", "/etc"}, "publish_image_ports": true})
	bindings := te.networkSettings(all).Ports["80/tcp"]
	if len(bindings) != 1 || bindings[0].HostPort == "" || bindings[0].HostPort == "0" {
		t.Fatalf("-P bindings: %+v", bindings)
	}
	if !poll.Within(20*time.Second, func() bool { return poll.Get("http://127.0.0.1:"+bindings[0].HostPort+"/hostname") != "" }) {
		code, out := te.exec(all, "wget", "-q", "-O", "-", "http://127.0.0.1/hostname")
		nat, _ := exec.Command("iptables", "-t", "nat", "-S").CombinedOutput()
		t.Fatalf("the -P port %s did not answer within 20s; from inside the container: %d %q; nat table:\n%s", bindings[0].HostPort, code, out, nat)
	}

	// container:ID shares srv's namespace; none has loopback only.
	joiner := te.Run(map[string]any{"name": "joiner", "command": []string{"sleep", "300"}, "netns": map[string]string{"nsmode": "container", "value": "srv"}})
	srvIP := te.networkSettings(srv).Networks["dnsa"].IPAddress
	if code, out := te.exec(joiner, "ip", "-4", "addr"); code != 0 || !strings.Contains(out, srvIP) {
		t.Fatalf("container mode does not see %s: %d %s", srvIP, code, out)
	}
	none := te.Run(map[string]any{"name": "none", "command": []string{"sleep", "300"}, "netns": map[string]string{"nsmode": "none"}})
	if code, out := te.exec(none, "ip", "-o", "link"); code != 0 || strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Fatalf("none mode links: %d %s", code, out)
	}

	// Stop tears the namespace down; start sets it up again.
	te.Must(http.StatusNoContent, "POST", "/containers/plain/stop?timeout=0", nil)
	if _, err := os.Stat(ns.SandboxKey); !os.IsNotExist(err) {
		t.Fatalf("namespace file after stop: %v", err)
	}
	if after := te.networkSettings(plain); after.IPAddress != "" {
		t.Fatalf("stopped container still reports %s", after.IPAddress)
	}
	te.Must(http.StatusNoContent, "POST", "/containers/plain/start", nil)
	if again := te.networkSettings(plain); again.IPAddress == "" {
		t.Fatal("restarted container has no address")
	}

	// A network in use goes only with force, which removes its containers.
	te.Must(http.StatusConflict, "DELETE", "/networks/dnsa", nil)
	te.Must(http.StatusOK, "DELETE", "/networks/dnsa?force=true&timeout=0", nil)
	for _, name := range []string{"srv", "cli"} {
		te.Must(http.StatusNotFound, "GET", "/containers/"+name+"/json", nil)
	}
	if poll.Get(fmt.Sprintf("http://127.0.0.1:%d/hostname", port)) != "" {
		t.Fatal("the published port still answers after its container went")
	}
}

// TestBadContainerNetworkRequests checks that a create request's network
// members are refused, not dropped, when they cannot take effect.
func TestBadContainerNetworkRequests(t *testing.T) {
	te := startEngine(t)
	te.Must(http.StatusOK, "POST", "/networks/create", map[string]any{"name": "plainnet"})
	for _, tc := range []struct {
		name   string
		spec   map[string]any
		status int
		field  string
	}{
		{"unknown network", map[string]any{"Networks": map[string]any{"nosuch": map[string]any{}}}, 404, ""},
		{"ports with host mode", map[string]any{"netns": map[string]string{"nsmode": "host"}, "portmappings": []map[string]any{{"container_port": 80}}}, 400, "portmappings"},
		{"networks with none", map[string]any{"netns": map[string]string{"nsmode": "none"}, "Networks": map[string]any{"plainnet": map[string]any{}}}, 400, "networks"},
		{"unknown mode", map[string]any{"netns": map[string]string{"nsmode": "slirp4netns"}}, 400, "netns"},
		{"relative ns path", map[string]any{"netns": map[string]string{"nsmode": "path", "value": "x"}}, 400, "netns"},
		{"unknown container", map[string]any{"netns": map[string]string{"nsmode": "container", "value": "nosuch"}}, 404, ""},
		{"bad protocol", map[string]any{"portmappings": []map[string]any{{"container_port": 80, "protocol": "icmp"}}}, 400, "portmappings"},
		{"no container port", map[string]any{"portmappings": []map[string]any{{"host_port": 8080}}}, 400, "portmappings"},
		{"range past 65535", map[string]any{"portmappings": []map[string]any{{"container_port": 65535, "range": 2}}}, 400, "portmappings"},
		{"bad host ip", map[string]any{"portmappings": []map[string]any{{"container_port": 80, "host_ip": "nope"}}}, 400, "portmappings"},
		{"host port twice", map[string]any{"portmappings": []map[string]any{{"container_port": 80, "host_port": 18080}, {"container_port": 81, "host_port": 18080}}}, 400, "portmappings"},
		{"static ip outside", map[string]any{"Networks": map[string]any{"plainnet": map[string]any{"static_ips": []string{"192.0.2.9"}}}}, 400, "static_ips"},
		{"alias without dns", map[string]any{"Networks": map[string]any{"plainnet": map[string]any{"aliases": []string{"x"}}}}, 400, "aliases"},
		{"bad mac", map[string]any{"Networks": map[string]any{"plainnet": map[string]any{"static_mac": "zz"}}}, 400, "body"},
		{"network options", map[string]any{"network_options": map[string][]string{"slirp4netns": {"mtu=1"}}}, 400, "network_options"},
		{"bad expose", map[string]any{"expose": map[string]string{"80": "icmp"}}, 400, "expose"},
	} {
		tc.spec["image"] = "localhost/busybox:latest"
		status, body := te.Do("POST", "/containers/create", tc.spec)
		if status != tc.status || (tc.field != "" && !strings.Contains(string(body), tc.field)) {
			t.Errorf("%s: %d %s, want %d naming %q", tc.name, status, body, tc.status, tc.field)
		}
	}

	// A static address taken by a running container is refused at start.
	var n network
	jsonOf(t, te.Must(http.StatusOK, "GET", "/networks/plainnet", nil), &n)
	_, subnet, _ := net.ParseCIDR(n.Subnets[0].Subnet)
	ip := subnet.IP.To4()
	static := fmt.Sprintf("%d.%d.%d.%d", ip[0], ip[1], ip[2], 9)
	spec := func(name string) map[string]any {
		return map[string]any{"name": name, "command": []string{"sleep", "300"},
			"Networks": map[string]any{"plainnet": map[string]any{"static_ips": []string{static}, "static_mac": "02:42:ac:11:00:09"}}}
	}
	first := te.Run(spec("first"))
	ns := te.networkSettings(first).Networks["plainnet"]
	if ns.IPAddress != static || ns.MacAddress != "02:42:ac:11:00:09" {
		t.Fatalf("static address and MAC: %+v", ns)
	}
	second := te.Create(spec("second"))
	te.Must(http.StatusConflict, "POST", "/containers/"+second+"/start", nil)
}
