package testnet

import (
	"net"
	"strconv"
	"testing"
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
