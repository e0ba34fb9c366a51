package runtime

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
)

// TestConnectedTCP: a process holding an established connection over its
// loopback is listed (both ends, with their ports), a listening socket is
// not: what CRIU refuses without --tcp-established and what it dumps.
func TestConnectedTCP(t *testing.T) {
	testdeadline.Set(t, time.Minute)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if got := ConnectedTCP([]int{os.Getpid()}); len(got) != 0 {
		t.Fatalf("with only a listener: %v, want none", got)
	}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := ConnectedTCP([]int{os.Getpid(), 999999999})
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	want := "remote port " + port + " (ESTABLISHED)"
	found := 0
	for _, g := range got {
		if strings.Contains(g, want) || strings.Contains(g, "local port "+port+",") {
			found++
		}
	}
	if found != 2 {
		t.Fatalf("ConnectedTCP: %v, want both ends of the connection to port %s", got, port)
	}
}
