package networksapi

import (
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
)

// TestPodmanPerNetworkOptionsOnTheDefaultNetwork: podman run --ip and
// --mac-address without --network name the default network "default" (as
// Podman's client does); the engine takes it for its default network, here
// one named after the test.
func TestPodmanPerNetworkOptionsOnTheDefaultNetwork(t *testing.T) {
	enginetest.RequirePodman(t)
	te := startEngine(t)
	ip := strings.TrimSuffix(te.Nets.DefaultSubnet, "0/24") + "77"
	te.MustPodman("run", "-d", "--name", "onthedefault", "--ip", ip, "--mac-address", "02:00:00:00:77:77", "localhost/busybox", "sleep", "300")
	out := te.MustPodman("inspect", "--format", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{$v.IPAddress}} {{$v.MacAddress}}{{end}}", "onthedefault")
	if want := te.Nets.DefaultNetwork + " " + ip + " 02:00:00:00:77:77"; strings.TrimSpace(out) != want {
		t.Fatalf("inspect: %q, want %q", out, want)
	}
	te.MustPodman("rm", "-f", "-t", "0", "onthedefault")
}
