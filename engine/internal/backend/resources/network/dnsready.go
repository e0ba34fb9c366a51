package network

import (
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// aardvark-dns before 1.11 closes every listener on SIGHUP and binds them
// again: for a moment after a reload nothing listens on a gateway's port
// 53, and a container that starts then is refused its first lookups (a
// busybox nslookup gives up at once). A setup that changed aardvark-dns's
// files therefore waits until the gateways of its DNS networks are served
// by sockets bound after the change. From 1.11 on, a reload keeps the
// listeners of the gateways it still serves, and only a new gateway is
// waited for.

// dnsReadyTimeout bounds the wait for aardvark-dns's listeners; past it the
// container starts anyway (its lookups retry) and the caller logs it.
const dnsReadyTimeout = 2 * time.Second

// dnsListeners are the inodes of the UDP sockets bound to port 53, by
// address.
type dnsListeners map[string]map[uint32]bool

// listDNSListeners answers which UDP sockets are bound to port 53 on each
// of gateways.
func listDNSListeners(gateways []net.IP) (dnsListeners, error) {
	out := dnsListeners{}
	families := map[uint8]bool{}
	for _, gw := range gateways {
		out[gw.String()] = map[uint32]bool{}
		if gw.To4() != nil {
			families[unix.AF_INET] = true
		} else {
			families[unix.AF_INET6] = true
		}
	}
	for family := range families {
		socks, err := netlink.SocketDiagUDP(family)
		if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
			return nil, fmt.Errorf("list UDP sockets: %w", err)
		}
		for _, s := range socks {
			if s.ID.SourcePort != 53 {
				continue
			}
			if inodes, ok := out[s.ID.Source.String()]; ok {
				inodes[s.INode] = true
			}
		}
	}
	return out, nil
}

// dnsGateways answers the gateway addresses of the DNS-enabled networks
// among nets, where aardvark-dns answers.
func dnsGateways(nets map[string]*core.Network) []net.IP {
	var out []net.IP
	for _, n := range nets {
		if n.DNSEnabled && n.Driver == Driver {
			out = append(out, gateways(n)...)
		}
	}
	return out
}

// awaitDNS waits until aardvark-dns serves each of gateways on a socket
// that was not among before (taken before the change), or, when its reloads
// keep listeners, until each gateway that had none has one.
func (n *netavark) awaitDNS(gateways []net.IP, before dnsListeners) error {
	rebinds := n.reloadRebinds()
	deadline := time.Now().Add(dnsReadyTimeout)
	for {
		now, err := listDNSListeners(gateways)
		if err != nil {
			return err
		}
		waiting := ""
		for addr, inodes := range now {
			old := before[addr]
			if len(old) > 0 && !rebinds {
				continue
			}
			fresh := false
			for inode := range inodes {
				fresh = fresh || !old[inode]
			}
			if !fresh {
				waiting = addr
				break
			}
		}
		if waiting == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("aardvark-dns does not listen on %s:53 %s after the change", waiting, dnsReadyTimeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// reloadRebinds tells whether this aardvark-dns binds all its listeners
// again on a reload: versions before 1.11, and one whose version cannot be
// read.
func (n *netavark) reloadRebinds() bool {
	n.versionOnce.Do(func() {
		n.rebinds = true
		if n.aardvark == "" {
			return
		}
		out, err := exec.Command(n.aardvark, "--version").Output()
		if err != nil {
			return
		}
		major, minor, ok := parseAardvarkVersion(string(out))
		n.rebinds = !ok || major < 1 || (major == 1 && minor < 11)
	})
	return n.rebinds
}

// parseAardvarkVersion reads "aardvark-dns 1.4.0" (what --version prints).
func parseAardvarkVersion(s string) (major, minor int, ok bool) {
	fields := strings.Fields(s)
	if len(fields) < 2 {
		return 0, 0, false
	}
	parts := strings.SplitN(fields[len(fields)-1], ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	return major, minor, err1 == nil && err2 == nil
}

// versionState is netavark's lazily read aardvark-dns version.
type versionState struct {
	versionOnce sync.Once
	rebinds     bool
}

// dnsChange is a setup's view of aardvark-dns's listeners taken before it
// changes aardvark-dns's files.
type dnsChange struct {
	m        *Manager
	gateways []net.IP
	before   dnsListeners
}

// beforeDNSChange notes the listeners on the gateways of nets' DNS
// networks; the caller holds setupMu.
func (m *Manager) beforeDNSChange(nets map[string]*core.Network) dnsChange {
	gws := dnsGateways(nets)
	if len(gws) == 0 {
		return dnsChange{}
	}
	before, err := listDNSListeners(gws)
	if err != nil {
		m.logger.Warn("list aardvark-dns's listeners; the container may start before they answer", "err", err)
		return dnsChange{}
	}
	return dnsChange{m: m, gateways: gws, before: before}
}

// await waits for aardvark-dns to listen again after the change; a
// listener that does not come back is logged.
func (c dnsChange) await() {
	if c.m == nil {
		return
	}
	if err := c.m.nv.awaitDNS(c.gateways, c.before); err != nil {
		c.m.logger.Warn("wait for aardvark-dns", "err", err)
	}
}
