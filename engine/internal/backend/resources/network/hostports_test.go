package network

import (
	"errors"
	"net"
	"strconv"
	"syscall"
	"testing"

	"github.com/berth-project/berth/engine/internal/core"
)

func bindable(network, addr string) bool {
	if network == "udp4" {
		c, err := net.ListenPacket(network, addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}
	l, err := net.Listen(network, addr)
	if err == nil {
		l.Close()
	}
	return err == nil
}

// TestHoldHostPorts: every port of a range is held, for TCP and UDP, SCTP
// is passed over; a port that cannot be bound fails the hold in Podman's
// words and leaves nothing bound.
func TestHoldHostPorts(t *testing.T) {
	taken, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	busy := taken.Addr().(*net.TCPAddr).Port
	free, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	first := free.Addr().(*net.TCPAddr).Port
	free.Close()
	at := func(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

	held, err := HoldHostPorts([]core.PortMapping{
		{HostIP: "127.0.0.1", HostPort: uint16(first), Range: 1, Protocol: "tcp"},
		{HostIP: "127.0.0.1", HostPort: uint16(first), Range: 1, Protocol: "udp"},
		{HostIP: "127.0.0.1", HostPort: uint16(first), Range: 1, Protocol: "sctp"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 2 || bindable("tcp4", at(first)) || bindable("udp4", at(first)) {
		t.Fatalf("held %d sockets; tcp bindable %v, udp bindable %v", len(held), bindable("tcp4", at(first)), bindable("udp4", at(first)))
	}
	ReleaseHostPorts(held)
	if !bindable("tcp4", at(first)) || !bindable("udp4", at(first)) {
		t.Fatal("released ports are still held")
	}

	_, err = HoldHostPorts([]core.PortMapping{
		{HostIP: "127.0.0.1", HostPort: uint16(first), Range: 1, Protocol: "tcp"},
		{HostIP: "127.0.0.1", HostPort: uint16(busy), Range: 1, Protocol: "tcp"},
	})
	var pe *core.HostPortError
	if !errors.As(err, &pe) || !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("hold of a taken port: %v, want a HostPortError of EADDRINUSE", err)
	}
	if want := "cannot listen on the TCP port: listen tcp4 " + at(busy) + ": bind: address already in use"; err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
	if !bindable("tcp4", at(first)) {
		t.Fatal("the port bound before the failure is still held")
	}
}
