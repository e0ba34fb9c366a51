package network

import (
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/berth-project/berth/engine/internal/core"
)

// HoldHostPorts binds every host port the mappings publish and answers the
// sockets, for the container's monitor to keep open as long as the
// container runs: the forwarding rules take the traffic before it reaches
// them, and while they are held no other container and no host process can
// listen there. This is how Podman reserves published ports (its conmon
// holds them too), and it makes a second container on a taken port fail to
// start instead of starting without the traffic.
//
// A port published on every address is held on every IPv4 address, as
// Podman holds it. SCTP ports are not held: the host may lack SCTP
// sockets, and Podman does not hold them either. The first port that
// cannot be bound fails the whole hold with a *core.HostPortError; nothing
// stays bound then.
func HoldHostPorts(ports []core.PortMapping) (held []*os.File, err error) {
	defer func() {
		if err != nil {
			ReleaseHostPorts(held)
			held = nil
		}
	}()
	for _, p := range ports {
		if p.Protocol != "tcp" && p.Protocol != "udp" {
			continue
		}
		network := p.Protocol + "4"
		if ip := net.ParseIP(p.HostIP); ip != nil && ip.To4() == nil {
			network = p.Protocol + "6"
		}
		for i := 0; i < max(int(p.Range), 1); i++ {
			addr := net.JoinHostPort(p.HostIP, strconv.Itoa(int(p.HostPort)+i))
			f, err := holdPort(network, addr)
			if err != nil {
				return held, &core.HostPortError{Protocol: p.Protocol, Address: addr, Err: err}
			}
			held = append(held, f)
		}
	}
	return held, nil
}

// holdPort binds one address and answers the socket as a file (a copy of
// its descriptor: the listener itself is closed).
func holdPort(network, addr string) (*os.File, error) {
	var sock interface {
		File() (*os.File, error)
		Close() error
	}
	if strings.HasPrefix(network, "udp") {
		c, err := net.ListenPacket(network, addr)
		if err != nil {
			return nil, err
		}
		sock = c.(*net.UDPConn)
	} else {
		l, err := net.Listen(network, addr)
		if err != nil {
			return nil, err
		}
		sock = l.(*net.TCPListener)
	}
	defer sock.Close()
	return sock.File()
}

// ReleaseHostPorts closes the engine's copies of held sockets (once the
// monitor has its own, or when the start failed).
func ReleaseHostPorts(held []*os.File) {
	for _, f := range held {
		f.Close()
	}
}
