package networksapi

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/poll"
)

// dnsEntryIDs answers the container IDs with a line in a network's
// aardvark-dns file (none when the file is gone). The file is named by the
// network's ID (what netavark knows the network by), looked up the first
// time, so the file can still be checked once the network is gone.
func (te *testEngine) dnsEntryIDs(network string) map[string]bool {
	te.T.Helper()
	if te.netIDs == nil {
		te.netIDs = map[string]string{}
	}
	id, ok := te.netIDs[network]
	if !ok {
		var n struct {
			ID string `json:"id"`
		}
		jsonOf(te.T, te.Must(http.StatusOK, "GET", "/networks/"+network+"/json", nil), &n)
		id = n.ID
		te.netIDs[network] = id
	}
	data, err := os.ReadFile(filepath.Join(te.Dir, "run", "networks", "aardvark-dns", id))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		te.T.Fatal(err)
	}
	out := map[string]bool{}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	for _, line := range lines[1:] {
		id, _, _ := strings.Cut(line, " ")
		out[id] = true
	}
	return out
}

// hasLink reports whether the host has an interface of that name.
func hasLink(name string) bool {
	return exec.Command("ip", "link", "show", name).Run() == nil
}

// TestDirectPathDNS runs containers on a DNS network through the direct
// path (their host veths are the engine's bvID, not netavark's): they
// resolve each other by name and alias through aardvark-dns, resolv.conf
// names the gateway and dns.podman, and a removed container's entry goes
// and its name stops resolving. A container set up by netavark (taken when
// aardvark-dns was killed, which netavark starts again) is torn down on
// the direct path without leaving its entry.
func TestDirectPathDNS(t *testing.T) {
	te := startEngine(t)
	te.Must(http.StatusOK, "POST", "/networks/create", map[string]any{"name": "ddns", "dns_enabled": true})
	a := te.Run(map[string]any{"name": "alpha", "command": []string{"sleep", "300"},
		"Networks": map[string]any{"ddns": map[string]any{"aliases": []string{"first"}}}})
	b := te.Run(map[string]any{"name": "beta", "command": []string{"sleep", "300"},
		"Networks": map[string]any{"ddns": map[string]any{}}})
	for _, id := range []string{a, b} {
		if !hasLink("bv" + id[:13]) {
			t.Fatalf("container %s did not take the direct path: no host veth bv%s", id[:12], id[:13])
		}
	}
	if ids := te.dnsEntryIDs("ddns"); !ids[a] || !ids[b] {
		t.Fatalf("aardvark-dns entries %v lack alpha or beta", ids)
	}
	// aardvark-dns 1.4 closes and binds again its listeners when it
	// rereads its entries; a setup waits for them (TestDNSAnsweredAfterReload),
	// so the first lookup is answered, with no retry.
	for _, q := range []struct{ in, name string }{{b, "alpha"}, {b, "first"}, {b, a[:12]}, {a, "beta"}} {
		if code, out := te.exec(q.in, "nslookup", q.name); code != 0 {
			t.Fatalf("nslookup %s: %d %s", q.name, code, out)
		}
	}
	gateway := te.networkSettings(b).Networks["ddns"].Gateway
	if code, out := te.exec(b, "cat", "/etc/resolv.conf"); code != 0 || !strings.Contains(out, "search dns.podman") || !strings.Contains(out, "nameserver "+gateway) {
		t.Fatalf("resolv.conf of beta (gateway %s): %d %s", gateway, code, out)
	}

	te.Must(http.StatusOK, "DELETE", "/containers/alpha?force=true&timeout=0", nil)
	if ids := te.dnsEntryIDs("ddns"); ids[a] {
		t.Fatalf("alpha's entry outlived it: %v", ids)
	}
	poll.Until(t, 10*time.Second, "alpha no longer resolving", func() bool {
		code, _ := te.exec(b, "nslookup", "alpha")
		return code != 0
	})

	// aardvark-dns killed: the next setup goes through netavark, which
	// starts it again with every entry.
	pidFile := filepath.Join(te.Dir, "run", "networks", "aardvark-dns", "aardvark.pid")
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill aardvark-dns %d: %v", pid, err)
	}
	poll.Until(t, 5*time.Second, "aardvark-dns gone", func() bool { return syscall.Kill(pid, 0) != nil })
	c := te.Run(map[string]any{"name": "gamma", "command": []string{"sleep", "300"},
		"Networks": map[string]any{"ddns": map[string]any{}}})
	if hasLink("bv" + c[:13]) {
		t.Fatal("gamma took the direct path without a running aardvark-dns")
	}
	for _, q := range []struct{ in, name string }{{c, "beta"}, {b, "gamma"}} {
		poll.Until(t, 10*time.Second, "resolving "+q.name, func() bool { code, _ := te.exec(q.in, "nslookup", q.name); return code == 0 })
	}
	te.Must(http.StatusOK, "DELETE", "/containers/gamma?force=true&timeout=0", nil)
	if ids := te.dnsEntryIDs("ddns"); ids[c] || !ids[b] {
		t.Fatalf("entries after gamma's removal: %v", ids)
	}
	poll.Until(t, 10*time.Second, "gamma no longer resolving", func() bool {
		code, _ := te.exec(b, "nslookup", "gamma")
		return code != 0
	})

	te.Must(http.StatusOK, "DELETE", "/containers/beta?force=true&timeout=0", nil)
	te.Must(http.StatusOK, "DELETE", "/networks/ddns", nil)
	if ids := te.dnsEntryIDs("ddns"); ids != nil {
		t.Fatalf("the aardvark-dns file outlived the network: %v", ids)
	}
	poll.Until(t, 10*time.Second, "aardvark-dns exiting with its last network", func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(readPID(pidFile)))
		return readPID(pidFile) == 0 || err != nil
	})
}

// readPID answers the pid in a file, or 0.
func readPID(file string) int {
	data, _ := os.ReadFile(file)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid
}
