package networksapi

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/poll"
	"github.com/berth-project/berth/shared/testnet"
)

// portHeld tells whether something holds addr for network ("tcp4",
// "udp4"): a bind of it fails with "address already in use".
func portHeld(t testing.TB, network, addr string) bool {
	t.Helper()
	var err error
	if strings.HasPrefix(network, "udp") {
		var c net.PacketConn
		if c, err = net.ListenPacket(network, addr); err == nil {
			c.Close()
		}
	} else {
		var l net.Listener
		if l, err = net.Listen(network, addr); err == nil {
			l.Close()
		}
	}
	if err != nil && !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("binding %s %s: %v", network, addr, err)
	}
	return err != nil
}

// natRulesFor are the nat table's rules that name host port port.
func natRulesFor(t testing.TB, port int) []string {
	t.Helper()
	out, err := exec.Command("iptables", "-t", "nat", "-S").CombinedOutput()
	if err != nil {
		t.Fatalf("iptables -t nat -S: %v: %s", err, out)
	}
	var rules []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, fmt.Sprintf("--dport %d ", port)) || strings.HasSuffix(line, fmt.Sprintf("--dport %d", port)) {
			rules = append(rules, line)
		}
	}
	return rules
}

// TestPublishedPortsHeld: as Podman does, a container's published host
// ports are bound while it runs (its conmon holds them), so a port that a
// host process or another container holds fails the start in Podman's
// words, with nothing of the container's network left; the hold survives
// an engine kill -9 and ends with the container. A pod's published ports
// are held by its infra container. Before, both containers started and the
// second never got the traffic, and a host process on the port lost its
// traffic to the container.
func TestPublishedPortsHeld(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the engine binary")
	}
	p := enginetest.StartProcess(t, networkOptions())
	te := &testEngine{Engine: p.Engine}
	te.Client.Timeout = 2 * time.Minute
	httpd := []string{"httpd", "-f", "-p", "80", "-h", "/etc"}

	// A host process holds the port: the start fails, the container stays
	// created, and no forwarding rule of the port is left.
	hostProc, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := hostProc.Addr().(*net.TCPAddr).Port
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	web := te.Create(map[string]any{"name": "web", "command": httpd,
		"portmappings": []map[string]any{{"host_ip": "127.0.0.1", "host_port": port, "container_port": 80}}})
	want := fmt.Sprintf("cannot listen on the TCP port: listen tcp4 %s: bind: address already in use", addr)
	code, body := te.Do("POST", "/containers/web/start", nil)
	if code != http.StatusInternalServerError || !strings.Contains(string(body), want) {
		t.Fatalf("start with the host port taken: %d %s, want 500 %q", code, body, want)
	}
	if rules := natRulesFor(t, port); len(rules) > 0 {
		t.Fatalf("forwarding rules left after the failed start: %v", rules)
	}
	var st struct{ State struct{ Status string } }
	te.Get("/containers/web/json", &st)
	if st.State.Status == "running" {
		t.Fatal("web runs although its port was taken")
	}
	hostProc.Close()
	te.Must(http.StatusNoContent, "POST", "/containers/web/start", nil)
	url := fmt.Sprintf("http://%s/hostname", addr)
	poll.Until(t, 20*time.Second, "web's published port answering", func() bool { return poll.Get(url) != "" })
	if !portHeld(t, "tcp4", addr) {
		t.Fatal("web's published port is not held while it runs")
	}

	// A UDP port and a range are held too.
	udp := testnet.FreePort(t)
	te.Run(map[string]any{"name": "udp", "command": []string{"sleep", "600"},
		"portmappings": []map[string]any{{"host_ip": "127.0.0.1", "host_port": udp, "container_port": 53, "protocol": "udp", "range": 2}}})
	for _, u := range []int{udp, udp + 1} {
		if !portHeld(t, "udp4", fmt.Sprintf("127.0.0.1:%d", u)) {
			t.Fatalf("udp port %d of the range is not held", u)
		}
	}

	// Another container on web's port: refused as a host process is, by
	// the real client too; web keeps answering.
	out, err := te.Podman("run", "-d", "--name", "second", "-p", addr+":80", "localhost/busybox:latest", "sleep", "600")
	if err == nil || !strings.Contains(out, want) {
		t.Fatalf("podman run on web's port: %v %s, want %q", err, out, want)
	}
	if got := strings.TrimSpace(poll.Get(url)); got != web[:12] {
		t.Fatalf("web's port answered %q after the refused start, want %s", got, web[:12])
	}

	// The hold outlives the engine, and ends with the container.
	p.Kill9()
	if !portHeld(t, "tcp4", addr) {
		t.Fatal("web's port was let go when the engine was killed")
	}
	p.Start()
	te.Must(http.StatusNoContent, "POST", "/containers/web/stop?timeout=0", nil)
	if portHeld(t, "tcp4", addr) {
		t.Fatal("web's port is still held after its stop")
	}
	te.Must(http.StatusNoContent, "POST", "/containers/second/start", nil)
	if !portHeld(t, "tcp4", addr) {
		t.Fatal("second's port is not held once it runs")
	}
	te.Must(http.StatusOK, "DELETE", "/containers/second?force=true&timeout=0", nil)
	te.Must(http.StatusOK, "DELETE", "/containers/udp?force=true&timeout=0", nil)
	if portHeld(t, "tcp4", addr) || portHeld(t, "udp4", fmt.Sprintf("127.0.0.1:%d", udp)) {
		t.Fatal("a port is still held after its container's removal")
	}

	// A pod's published port is held by its infra container while the pod
	// runs.
	podPort := testnet.FreePort(t)
	podAddr := fmt.Sprintf("127.0.0.1:%d", podPort)
	te.MustPodman("pod", "create", "--name", "pub", "-p", podAddr+":80")
	te.MustPodman("pod", "start", "pub")
	if !portHeld(t, "tcp4", podAddr) {
		t.Fatal("the pod's published port is not held while it runs")
	}
	te.MustPodman("pod", "stop", "-t", "0", "pub")
	if portHeld(t, "tcp4", podAddr) {
		t.Fatal("the pod's published port is still held after its stop")
	}
	te.MustPodman("pod", "rm", "pub")
	te.Must(http.StatusOK, "DELETE", "/containers/web?force=true&timeout=0", nil)
	te.assertNoLeftovers()
}
