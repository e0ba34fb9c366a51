package dockerapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/berth-project/berth/engine/internal/core"
)

// hostPortTaken refuses, in dockerd's words, the start of a container that
// publishes a host port a running or paused container publishes already:
// dockerd's port allocator holds each published port, while the engine's
// forwarding rules would both be written and the second container would
// never see the traffic (docker compose up of two services on one port
// started both). A container that is not found, or already running, is
// left for the start to answer.
func (s *server) hostPortTaken(ctx context.Context, name string) error {
	c, err := s.deps.Containers.Lookup(ctx, name)
	if err != nil || len(c.Spec.PortMappings) == 0 || c.State == core.StateRunning || c.State == core.StatePaused {
		return nil
	}
	others, err := s.deps.Containers.List(ctx, core.ListContainersOptions{All: true})
	if err != nil {
		return err
	}
	for _, o := range others {
		if o.ID == c.ID || (o.State != "running" && o.State != "paused") {
			continue
		}
		for _, want := range c.Spec.PortMappings {
			for _, held := range o.Ports {
				if port, ok := samePort(want, held); ok {
					return fmt.Errorf("driver failed programming external connectivity on endpoint %s (%s): Bind for %s failed: port is already allocated",
						c.Name, c.ID, net.JoinHostPort(anyIPv4(want.HostIP), strconv.Itoa(port)))
				}
			}
		}
	}
	return nil
}

// hostPortInDockerdWords says a start's refusal of a host port that
// something other than a container holds (the engine binds each published
// port when the container starts) as dockerd's userland proxy says it:
// "Error starting userland proxy: listen tcp4 0.0.0.0:PORT: bind: address
// already in use". Other errors pass as they are.
func (s *server) hostPortInDockerdWords(ctx context.Context, name string, err error) error {
	var pe *core.HostPortError
	var op *net.OpError
	if !errors.As(err, &pe) || !errors.As(pe.Err, &op) {
		return err
	}
	c, lerr := s.deps.Containers.Lookup(ctx, name)
	if lerr != nil {
		return err
	}
	addr := pe.Address
	if strings.HasPrefix(addr, ":") {
		addr = "0.0.0.0" + addr
	}
	return fmt.Errorf("driver failed programming external connectivity on endpoint %s (%s): Error starting userland proxy: listen %s %s: %v",
		c.Name, c.ID, op.Net, addr, op.Err)
}

// samePort tells whether two published ranges share a host port of one
// protocol on addresses that overlap (equal, or either unspecified), and
// answers the first shared port.
func samePort(a, b core.PortMapping) (int, bool) {
	if a.Protocol != b.Protocol || !overlappingHostIPs(a.HostIP, b.HostIP) {
		return 0, false
	}
	lo := max(int(a.HostPort), int(b.HostPort))
	if lo <= min(int(a.HostPort)+rangeOf(a)-1, int(b.HostPort)+rangeOf(b)-1) {
		return lo, true
	}
	return 0, false
}

func rangeOf(p core.PortMapping) int { return max(int(p.Range), 1) }

// overlappingHostIPs: "" is every address, 0.0.0.0 every IPv4 one and ::
// every IPv6 one.
func overlappingHostIPs(a, b string) bool {
	if a == "" || b == "" || a == b {
		return true
	}
	ipA, ipB := net.ParseIP(a), net.ParseIP(b)
	if ipA == nil || ipB == nil || (ipA.To4() == nil) != (ipB.To4() == nil) {
		return false
	}
	return ipA.IsUnspecified() || ipB.IsUnspecified()
}

// anyIPv4 names the address dockerd's message names: 0.0.0.0 for a port
// published on every address.
func anyIPv4(ip string) string {
	if ip == "" {
		return "0.0.0.0"
	}
	return ip
}
