package network

import (
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/testsupport/need"
	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
)

// requireRootIP skips (or fails under BERTH_TEST_STRICT=1) where the test
// cannot create interfaces.
func requireRootIP(t *testing.T) {
	t.Helper()
	need.All(t, "the bridge tests", "root", "ip")
}

func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v %s", strings.Join(args, " "), err, out)
	}
}

func linkMAC(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("/sys/class/net/" + name + "/address")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestPinBridgeMAC checks that a pinned bridge keeps its address when a port
// with a lower address joins, and that an unpinned one does not (the
// kernel's rule that made live connects lose the gateway).
func TestPinBridgeMAC(t *testing.T) {
	testdeadline.Set(t, testdeadline.Default)
	requireRootIP(t)
	for _, pin := range []bool{true, false} {
		t.Run(fmt.Sprintf("pin=%v", pin), func(t *testing.T) {
			var x [3]byte
			rand.Read(x[:])
			br := fmt.Sprintf("bnfbr%x", x)
			veth := fmt.Sprintf("bnfve%x", x)
			ipCmd(t, "link", "add", br, "type", "bridge")
			t.Cleanup(func() { exec.Command("ip", "link", "del", br).Run() })
			ipCmd(t, "link", "add", veth, "type", "veth", "peer", "name", veth+"p")
			t.Cleanup(func() { exec.Command("ip", "link", "del", veth).Run() })
			// A port whose address is below any random one the kernel picks.
			ipCmd(t, "link", "set", veth, "address", "00:00:5e:00:53:01")
			if pin {
				if err := pinBridgeMAC(br); err != nil {
					t.Fatal(err)
				}
				if err := pinBridgeMAC(br); err != nil {
					t.Fatalf("second pin: %v", err)
				}
			}
			before := linkMAC(t, br)
			ipCmd(t, "link", "set", veth, "master", br)
			after := linkMAC(t, br)
			if pin && after != before {
				t.Fatalf("pinned bridge changed its address from %s to %s", before, after)
			}
			if !pin && after != "00:00:5e:00:53:01" {
				t.Fatalf("unpinned bridge kept %s (was %s): the kernel rule this guards against did not show", after, before)
			}
		})
	}
	if err := pinBridgeMAC("bnfnosuchbr0"); err != nil {
		t.Fatalf("missing bridge: %v", err)
	}
}
