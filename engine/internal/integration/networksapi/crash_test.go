package networksapi

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
)

// engineProcess is berth-engine run as its own process, so a test can kill it.
type engineProcess struct {
	t       *testing.T
	bin     string
	dir     string
	flags   []string
	addr    string
	cmd     *exec.Cmd
	logFile string
}

func (p *engineProcess) start() {
	p.t.Helper()
	p.addr = fmt.Sprintf("127.0.0.1:%d", freePort(p.t))
	log, err := os.OpenFile(p.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	defer log.Close()
	args := append([]string{"--listen", "tcp://" + p.addr, "--root", filepath.Join(p.dir, "root"), "--runroot", filepath.Join(p.dir, "run")}, p.flags...)
	p.cmd = exec.Command(p.bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = log, log
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	eventually(p.t, 30*time.Second, "the engine answering _ping", func() bool {
		resp, err := http.Get("http://" + p.addr + "/libpod/_ping")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

func (p *engineProcess) kill9() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Process.Wait()
}

func (p *engineProcess) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.cmd.Process.Wait()
}

// TestKillEngineKeepsNetworks kills the engine (SIGKILL) while containers
// run on a DNS network with a published port: they keep their addresses and
// stay reachable; the restarted engine knows their addresses, hands a new
// container a different one, and stopping and removing everything leaves no
// namespace, interface, firewall rule or aardvark-dns entry behind.
func TestKillEngineKeepsNetworks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the engine binary")
	}
	testdeadline.Set(t, testdeadline.Default)
	requireNetworking(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "berth-engine")
	build := exec.Command("go", "build", "-tags", "containers_image_openpgp,exclude_graphdriver_btrfs,exclude_graphdriver_devicemapper",
		"-o", bin, "github.com/berth-project/berth/engine/cmd/berth-engine")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build berth-engine: %v\n%s", err, out)
	}
	nets := enginetest.UniqueNetworks(t)
	p := &engineProcess{t: t, bin: bin, dir: dir, flags: enginetest.NetworkFlags(nets), logFile: filepath.Join(dir, "engine.log")}
	p.start()
	te := &testEngine{t: t, url: "http://" + p.addr + "/v4.3.1/libpod", addr: p.addr, nets: nets, client: &http.Client{Timeout: 2 * time.Minute}, dir: dir}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			enginetest.RemoveAll(te.do)
			te.removeNetworks()
			p.stop()
		}
		enginetest.UnmountUnder(dir, 2)
	})
	te.loadBusybox()

	te.must(http.StatusOK, "POST", "/networks/create", map[string]any{"name": "crashnet", "dns_enabled": true})
	port := freePort(t)
	srv := te.run(map[string]any{"name": "srv", "command": []string{"httpd", "-f", "-p", "80", "-h", "/etc"},
		"Networks":     map[string]any{"crashnet": map[string]any{"aliases": []string{"web"}}},
		"portmappings": []map[string]any{{"host_ip": "127.0.0.1", "host_port": port, "container_port": 80}}})
	cli := te.run(map[string]any{"name": "cli", "command": []string{"sleep", "600"}, "Networks": map[string]any{"crashnet": map[string]any{}}})
	srvIP := te.networkSettings(srv).Networks["crashnet"].IPAddress
	url := fmt.Sprintf("http://127.0.0.1:%d/hostname", port)
	eventually(t, 20*time.Second, "the published port answering", func() bool { return httpGet(url) != "" })

	p.kill9()
	if httpGet(url) == "" {
		t.Fatal("the published port went with the engine")
	}

	p.start()
	te.url, te.addr = "http://"+p.addr+"/v4.3.1/libpod", p.addr
	if got := te.networkSettings(srv).Networks["crashnet"].IPAddress; got != srvIP {
		t.Fatalf("after the restart srv reports %q, want %s", got, srvIP)
	}
	if code, out := te.exec(cli, "wget", "-q", "-O", "-", "http://web/hostname"); code != 0 || strings.TrimSpace(out) != srv[:12] {
		t.Fatalf("name resolution after the restart: %d %q", code, out)
	}
	// third publishes a port, so netavark sets it up and no keeper comes
	// back on crashnet.
	third := te.run(map[string]any{"name": "third", "command": []string{"sleep", "600"}, "Networks": map[string]any{"crashnet": map[string]any{}},
		"portmappings": []map[string]any{{"host_ip": "127.0.0.1", "host_port": freePort(t), "container_port": 80}}})
	seen := map[string]bool{srvIP: true, te.networkSettings(cli).Networks["crashnet"].IPAddress: true}
	if ip := te.networkSettings(third).Networks["crashnet"].IPAddress; ip == "" || seen[ip] {
		t.Fatalf("the new container got %q, one of %v", ip, seen)
	}
	// cli was plumbed on the direct path before the kill; without a keeper
	// netavark tears it down, and its entry goes.
	te.must(http.StatusNoContent, "POST", "/containers/cli/stop?timeout=0", nil)
	if ids := te.dnsEntryIDs("crashnet"); ids[cli] || !ids[srv] || !ids[third] {
		t.Fatalf("aardvark-dns entries after cli's stop: %v", ids)
	}
	for _, name := range []string{"srv", "third"} {
		te.must(http.StatusNoContent, "POST", "/containers/"+name+"/stop?timeout=0", nil)
	}
	if httpGet(url) != "" {
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
	enginetest.RemoveAll(te.do)
	te.must(http.StatusOK, "DELETE", "/networks/crashnet", nil)
	if ids := te.dnsEntryIDs("crashnet"); ids != nil {
		t.Fatalf("aardvark-dns entries left after the network's removal: %v", ids)
	}
	te.assertNoLeftovers()
}
