// Package testnet holds the loopback helpers the tests of every module
// share: an address or port no listener holds now, for a server the test
// starts itself (an engine, a registry, Prometheus, PostgreSQL), and the
// start, readiness wait and stop of such a server's process.
package testnet

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// FreeAddr returns a loopback host:port (on host, 127.0.0.1 when empty)
// that no listener held a moment ago. The port lies below the kernel's
// ephemeral range where one is free there: a server that a test stops or
// kills and starts again on the same address would otherwise find it
// taken by an outgoing connection of any process on the machine, which
// the kernel gives ports of that range (seen in CI: an engine restarted
// after a kill -9, "bind: address already in use").
func FreeAddr(t testing.TB, host ...string) string {
	t.Helper()
	h := "127.0.0.1"
	if len(host) > 0 && host[0] != "" {
		h = host[0]
	}
	if low := ephemeralLow(); low > belowEphemeral+1024 {
		for range 64 {
			addr := net.JoinHostPort(h, strconv.Itoa(belowEphemeral+rand.IntN(low-belowEphemeral)))
			if ln, err := net.Listen("tcp", addr); err == nil {
				ln.Close()
				return addr
			}
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(h, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// belowEphemeral is the lowest port FreeAddr picks from.
const belowEphemeral = 20000

// ephemeralLow is the first port of the kernel's ephemeral range (32768
// by default on Linux); 0 where it cannot be read.
func ephemeralLow() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return 0
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 0
	}
	return n
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
