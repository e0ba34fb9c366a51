// Package testnet holds the loopback helpers the tests of every module
// share: an address or port no listener holds now, for a server the test
// starts itself (an engine, a registry, Prometheus, PostgreSQL), and the
// start, readiness wait and stop of such a server's process.
package testnet

import (
	"net"
	"strconv"
	"testing"
)

// FreeAddr returns a loopback host:port (on host, 127.0.0.1 when empty)
// that no listener held a moment ago.
func FreeAddr(t testing.TB, host ...string) string {
	t.Helper()
	h := "127.0.0.1"
	if len(host) > 0 && host[0] != "" {
		h = host[0]
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(h, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// FreePort returns a port of 127.0.0.1 that no listener held a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	_, port, _ := net.SplitHostPort(FreeAddr(t))
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
