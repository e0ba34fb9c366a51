package testnet

import (
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// TestFreeAddrCanBeListenedOn: the address answered is loopback and free.
func TestFreeAddrCanBeListenedOn(t *testing.T) {
	for _, addr := range []string{FreeAddr(t), FreeAddr(t, "127.0.0.1"), "127.0.0.1:" + strconv.Itoa(FreePort(t))} {
		host, port, err := net.SplitHostPort(addr)
		if err != nil || port == "0" || !net.ParseIP(host).IsLoopback() {
			t.Fatalf("%q: not a loopback host:port (%v)", addr, err)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listen on %s: %v", addr, err)
		}
		ln.Close()
	}
}

// TestFreeAddrIsBelowTheEphemeralRange: the ports lie outside the range
// the kernel gives outgoing connections, so a server restarted on one does
// not find it taken by a client's socket.
func TestFreeAddrIsBelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	if low <= belowEphemeral+1024 {
		t.Skipf("ephemeral range starts at %d: FreeAddr takes any free port", low)
	}
	seen := map[int]bool{}
	for range 20 {
		port := FreePort(t)
		if port < belowEphemeral || port >= low {
			t.Fatalf("port %d: want one in [%d, %d)", port, belowEphemeral, low)
		}
		seen[port] = true
	}
	if len(seen) < 15 {
		t.Errorf("20 calls gave %d ports: %v", len(seen), seen)
	}
}

// TestServerReadyAndStopped: a server is waited for until it answers, and
// SIGTERM ends it when the test does.
func TestServerReadyAndStopped(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 for a throwaway HTTP server")
	}
	port := FreePort(t)
	var s *Server
	t.Run("ready", func(t *testing.T) {
		s = StartServer(t, "http.server", exec.Command(python, "-m", "http.server", "--bind", "127.0.0.1", strconv.Itoa(port)), 10*time.Second, true)
		s.WaitReady(t, "http://127.0.0.1:"+strconv.Itoa(port)+"/", 20*time.Second, nil)
	})
	select {
	case <-s.exited:
	default:
		t.Fatal("the server still runs after its test ended")
	}
}
