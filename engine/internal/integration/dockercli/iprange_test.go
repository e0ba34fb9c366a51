package dockercli

import (
	"fmt"
	"strings"
	"testing"
)

// TestDockerNetworkIPRange: docker network create --ip-range hands out
// container addresses from the range only, and network inspect shows the
// range back; a range that is not a CIDR block, or lies outside the subnet,
// is refused naming it.
func TestDockerNetworkIPRange(t *testing.T) {
	te := startEngine(t)
	// A /24 of the engine's own subnet pool (unique to the test) whose upper
	// half is the range.
	parts := strings.Split(strings.TrimSuffix(te.Nets.SubnetPool[0], ".0/20"), ".")
	var third int
	fmt.Sscan(parts[2], &third)
	prefix := fmt.Sprintf("%s.%s.%d.", parts[0], parts[1], third+5)
	te.run("docker", "network", "create", "--subnet", prefix+"0/24", "--ip-range", prefix+"128/25", "ranged")
	if got := strings.TrimSpace(te.run("docker", "network", "inspect", "--format", "{{range .IPAM.Config}}{{.IPRange}}{{end}}", "ranged")); got != prefix+"128/25" {
		t.Fatalf("network inspect IPRange %q, want %s128/25", got, prefix)
	}
	for _, name := range []string{"r1", "r2"} {
		te.run("docker", "run", "-d", "--name", name, "--network", "ranged", "localhost/busybox:latest", "sleep", "300")
		ip := strings.TrimSpace(te.run("docker", "inspect", "--format", "{{.NetworkSettings.Networks.ranged.IPAddress}}", name))
		var last int
		if _, err := fmt.Sscan(strings.TrimPrefix(ip, prefix), &last); err != nil || !strings.HasPrefix(ip, prefix) || last < 128 || last > 254 {
			t.Fatalf("%s got %q, outside the range %s128/25", name, ip, prefix)
		}
	}
	// The CLI checks the CIDR itself; a raw request reaches the engine.
	body := fmt.Sprintf(`{"Name":"badrange","IPAM":{"Config":[{"Subnet":"%s0/24","IPRange":"%s300"}]}}`, prefix, prefix)
	if status, _, answer := te.Exchange("POST", te.Base()+"/v1.44/networks/create", "application/json", strings.NewReader(body)); status != 400 || !strings.Contains(string(answer), "IPRange") {
		t.Fatalf("a range that is not CIDR: %d %s, want 400 naming IPRange", status, answer)
	}
	body = fmt.Sprintf(`{"Name":"outrange","IPAM":{"Config":[{"Subnet":"%s0/24","IPRange":"%s0/23"}]}}`, prefix, prefix)
	if status, _, answer := te.Exchange("POST", te.Base()+"/v1.44/networks/create", "application/json", strings.NewReader(body)); status != 400 || !strings.Contains(string(answer), "IPRange") {
		t.Fatalf("a range wider than the subnet: %d %s, want 400 naming IPRange", status, answer)
	}
	te.fails("docker", "network", "inspect", "badrange")
	te.fails("docker", "network", "inspect", "outrange")
	te.run("docker", "rm", "-f", "r1", "r2")
	te.run("docker", "network", "rm", "ranged")
}
