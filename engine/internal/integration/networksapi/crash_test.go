package networksapi

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/poll"
	"github.com/berth-project/berth/shared/testnet"
)

// TestKillEngineKeepsNetworks kills the engine (SIGKILL) while containers
// run on a DNS network with a published port: they keep their addresses and
// stay reachable; the restarted engine knows their addresses, hands a new
// container a different one, and stopping and removing everything leaves no
// namespace, interface, firewall rule or aardvark-dns entry behind.
func TestKillEngineKeepsNetworks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the engine binary")
	}
	p := enginetest.StartProcess(t, networkOptions())
	te, dir := &testEngine{Engine: p.Engine}, p.Dir
	te.Client.Timeout = 2 * time.Minute

	te.Must(http.StatusOK, "POST", "/networks/create", map[string]any{"name": "crashnet", "dns_enabled": true})
	port := testnet.FreePort(t)
	srv := te.Run(map[string]any{"name": "srv", "command": []string{"httpd", "-f", "-p", "80", "-h", "/etc"},
		"Networks":     map[string]any{"crashnet": map[string]any{"aliases": []string{"web"}}},
		"portmappings": []map[string]any{{"host_ip": "127.0.0.1", "host_port": port, "container_port": 80}}})
	cli := te.Run(map[string]any{"name": "cli", "command": []string{"sleep", "600"}, "Networks": map[string]any{"crashnet": map[string]any{}}})
	srvIP := te.networkSettings(srv).Networks["crashnet"].IPAddress
	url := fmt.Sprintf("http://127.0.0.1:%d/hostname", port)
	poll.Until(t, 20*time.Second, "the published port answering", func() bool { return poll.Get(url) != "" })

	p.Kill9()
	if poll.Get(url) == "" {
		t.Fatal("the published port went with the engine")
	}

	p.Start()
	if got := te.networkSettings(srv).Networks["crashnet"].IPAddress; got != srvIP {
		t.Fatalf("after the restart srv reports %q, want %s", got, srvIP)
	}
	if code, out := te.exec(cli, "wget", "-q", "-O", "-", "http://web/hostname"); code != 0 || strings.TrimSpace(out) != srv[:12] {
		t.Fatalf("name resolution after the restart: %d %q", code, out)
	}
	// third publishes a port, so netavark sets it up and no keeper comes
	// back on crashnet.
	third := te.Run(map[string]any{"name": "third", "command": []string{"sleep", "600"}, "Networks": map[string]any{"crashnet": map[string]any{}},
		"portmappings": []map[string]any{{"host_ip": "127.0.0.1", "host_port": testnet.FreePort(t), "container_port": 80}}})
	seen := map[string]bool{srvIP: true, te.networkSettings(cli).Networks["crashnet"].IPAddress: true}
	if ip := te.networkSettings(third).Networks["crashnet"].IPAddress; ip == "" || seen[ip] {
		t.Fatalf("the new container got %q, one of %v", ip, seen)
	}
	// cli was plumbed on the direct path before the kill; without a keeper
	// netavark tears it down, and its entry goes.
	te.Must(http.StatusNoContent, "POST", "/containers/cli/stop?timeout=0", nil)
	if ids := te.dnsEntryIDs("crashnet"); ids[cli] || !ids[srv] || !ids[third] {
		t.Fatalf("aardvark-dns entries after cli's stop: %v", ids)
	}
	for _, name := range []string{"srv", "third"} {
		te.Must(http.StatusNoContent, "POST", "/containers/"+name+"/stop?timeout=0", nil)
	}
	if poll.Get(url) != "" {
		t.Fatal("the published port still answers after stop")
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "run", "netns")); len(entries) > 0 {
		t.Fatalf("namespaces left after stop: %v", entries)
	}
	// The network's keeper keeps its own entry while the network exists.
	for _, id := range []string{srv, cli, third} {
		if te.dnsEntryIDs("crashnet")[id] {
			t.Fatalf("aardvark-dns entry of %s left after stop", id[:12])
		}
	}
	enginetest.RemoveAll(te.Do)
	te.Must(http.StatusOK, "DELETE", "/networks/crashnet", nil)
	if ids := te.dnsEntryIDs("crashnet"); ids != nil {
		t.Fatalf("aardvark-dns entries left after the network's removal: %v", ids)
	}
	te.assertNoLeftovers()
}
