package hostsuite

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/need"
)

// TestDNSAnsweredAtStart: on Debian 12's aardvark-dns (1.4, which closes
// and binds again its listeners at every reload), each container's name
// on a DNS network is answered from the gateway the moment its start
// returns: the first through netavark's setup, which starts aardvark-dns,
// the others through the engine's direct path, which reloads it.
func TestDNSAnsweredAtStart(t *testing.T) {
	l := startLab(t)
	need.All(t, "host suite tests", "/usr/lib/podman/netavark", "/usr/lib/podman/aardvark-dns")
	var n struct {
		Subnets []struct{ Gateway string } `json:"subnets"`
	}
	if err := json.Unmarshal(l.Must(http.StatusOK, "POST", "/networks/create", map[string]any{"name": "labdns", "dns_enabled": true}), &n); err != nil || len(n.Subnets) == 0 {
		t.Fatalf("network create: %v %+v", err, n)
	}
	t.Cleanup(func() { l.Do("DELETE", "/networks/labdns?force=true", nil) })
	gateway := n.Subnets[0].Gateway
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", net.JoinHostPort(gateway, "53"))
	}}
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("labdns%d", i)
		l.Run(map[string]any{"name": name, "command": []string{"sleep", "300"}, "Networks": map[string]any{"labdns": map[string]any{}}})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		addrs, err := resolver.LookupHost(ctx, name)
		cancel()
		if err != nil || len(addrs) == 0 {
			t.Fatalf("lookup of %s at %s right after its start: %v %v", name, gateway, addrs, err)
		}
	}
}
