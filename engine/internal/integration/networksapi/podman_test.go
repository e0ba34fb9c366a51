package networksapi

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/poll"
)

// TestPodmanRemoteNetworks drives the networks with the podman 4.3.1
// client: network create (subnet, gateway, ip-range, internal, ipv6,
// label, opt), ls with filters and --format, inspect, exists, connect and
// disconnect with --alias and --ip, rm -f, prune, run --network, -p, -P
// and port.
func TestPodmanRemoteNetworks(t *testing.T) {
	enginetest.RequirePodman(t)
	te := startEngine(t)
	block := strings.TrimSuffix(te.Nets.SubnetPool[0], ".0/20")
	parts := strings.Split(block, ".")
	var third int
	fmt.Sscan(parts[2], &third)
	subnet := fmt.Sprintf("%s.%s.%d.0/24", parts[0], parts[1], third+3)
	gw := fmt.Sprintf("%s.%s.%d.1", parts[0], parts[1], third+3)
	ipRange := fmt.Sprintf("%s.%s.%d.128/25", parts[0], parts[1], third+3)
	static := fmt.Sprintf("%s.%s.%d.200", parts[0], parts[1], third+3)

	te.MustPodman("network", "create", "--subnet", subnet, "--gateway", gw, "--ip-range", ipRange,
		"--label", "tier=web", "--opt", "mtu=1400", "pnet")
	te.MustPodman("network", "create", "--internal", "--ipv6", "pint")
	if out := te.MustPodman("network", "ls", "--filter", "label=tier=web", "--format", "{{.Name}}"); strings.TrimSpace(out) != "pnet" {
		t.Fatalf("ls --filter label: %q", out)
	}
	if out := te.MustPodman("network", "ls", "--format", "{{.Name}} {{.Driver}}"); !strings.Contains(out, "pint bridge") || !strings.Contains(out, te.Nets.DefaultNetwork+" bridge") {
		t.Fatalf("ls: %q", out)
	}
	if out := te.MustPodman("network", "inspect", "pnet", "--format", "{{range .Subnets}}{{.Subnet}} {{.Gateway}}{{end}} {{.Options}}"); !strings.Contains(out, subnet+" "+gw) || !strings.Contains(out, "mtu:1400") {
		t.Fatalf("inspect: %q", out)
	}
	te.MustPodman("network", "exists", "pnet")
	if _, err := te.Podman("network", "exists", "nosuch"); err == nil {
		t.Fatal("network exists nosuch succeeded")
	}
	if out, err := te.Podman("network", "create", "pnet"); err == nil || !strings.Contains(out, "network already exists") {
		t.Fatalf("create of a taken name: %v %s", err, out)
	}

	// run --network, -p, port; a static address from connect --ip.
	te.MustPodman("run", "-d", "--name", "web", "--network", "pnet", "--network-alias", "www",
		"-p", "127.0.0.1::80", "localhost/busybox", "httpd", "-f", "-p", "80", "-h", "/etc")
	port := strings.TrimSpace(te.MustPodman("port", "web", "80"))
	if !strings.HasPrefix(port, "127.0.0.1:") {
		t.Fatalf("port web 80: %q", port)
	}
	poll.Until(t, 20*time.Second, "web answering on "+port, func() bool { return poll.Get("http://"+port+"/hostname") != "" })
	if out := te.MustPodman("ps", "--format", "{{.Names}} {{.Networks}} {{.Ports}}"); !strings.Contains(out, "web pnet "+port+"->80/tcp") {
		t.Fatalf("ps: %q", out)
	}
	if out := te.MustPodman("run", "--rm", "--network", "pnet", "localhost/busybox", "wget", "-q", "-O", "-", "http://www/hostname"); strings.TrimSpace(out) == "" {
		t.Fatal("wget by alias answered nothing")
	}
	te.MustPodman("run", "-d", "--name", "side", "localhost/busybox", "sleep", "300")
	te.MustPodman("network", "connect", "--alias", "sidekick", "--ip", static, "pnet", "side")
	if out := te.MustPodman("inspect", "side", "--format", "{{(index .NetworkSettings.Networks \"pnet\").IPAddress}}"); strings.TrimSpace(out) != static {
		t.Fatalf("connect --ip: %q", out)
	}
	if out := te.MustPodman("exec", "web", "nslookup", "sidekick"); !strings.Contains(out, static) {
		t.Fatalf("nslookup sidekick: %q", out)
	}
	te.MustPodman("network", "disconnect", "pnet", "side")
	if out := te.MustPodman("inspect", "side", "--format", "{{len .NetworkSettings.Networks}}"); strings.TrimSpace(out) != "1" {
		t.Fatalf("networks after disconnect: %q", out)
	}

	// -P from the image's EXPOSE.
	te.MustPodman("run", "-d", "--name", "pub", "-P", "localhost/busybox", "httpd", "-f", "-p", "80", "-h", "/etc")
	if out := te.MustPodman("port", "pub"); !strings.Contains(out, "80/tcp -> 0.0.0.0:") {
		t.Fatalf("port pub: %q", out)
	}

	if out, err := te.Podman("network", "rm", "pnet"); err == nil {
		t.Fatalf("rm of a network in use succeeded: %s", out)
	}
	te.MustPodman("network", "rm", "-f", "pnet")
	if _, err := te.Podman("container", "exists", "web"); err == nil {
		t.Fatal("rm -f left the network's container")
	}
	if out := te.MustPodman("network", "prune", "-f"); !strings.Contains(out, "pint") {
		t.Fatalf("prune: %q", out)
	}
	if out := te.MustPodman("network", "ls", "-q"); strings.Fields(out)[0] == "" || len(strings.Fields(out)) != 1 {
		t.Fatalf("networks after prune: %q", out)
	}
}
