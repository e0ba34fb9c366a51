package network

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"strings"

	"github.com/berth-project/berth/engine/internal/core"
)

// The engine does its own address management: netavark only ever gets
// static addresses. Subnets come from the request or from a pool; every
// address handed to a container is a lease row in the state database.

// overlaps reports whether two subnets share an address.
func overlaps(a, b *net.IPNet) bool {
	return a.Contains(b.IP) || b.Contains(a.IP)
}

// isIPv4 reports whether a subnet is IPv4.
func isIPv4(n *net.IPNet) bool { return n.IP.To4() != nil && len(n.Mask) == net.IPv4len }

// ipToInt and intToIP convert addresses for arithmetic.
func ipToInt(ip net.IP) *big.Int {
	if v4 := ip.To4(); v4 != nil {
		return new(big.Int).SetBytes(v4)
	}
	return new(big.Int).SetBytes(ip.To16())
}

func intToIP(i *big.Int, v4 bool) net.IP {
	size := net.IPv6len
	if v4 {
		size = net.IPv4len
	}
	b := i.Bytes()
	out := make(net.IP, size)
	copy(out[size-len(b):], b)
	return out
}

// lastIP is the highest address of a subnet (the IPv4 broadcast).
func lastIP(n *net.IPNet) net.IP {
	ip := n.IP.To16()
	if isIPv4(n) {
		ip = n.IP.To4()
	}
	out := make(net.IP, len(ip))
	for i := range ip {
		out[i] = ip[i] | ^n.Mask[i]
	}
	return out
}

func nextIP(ip net.IP, v4 bool) net.IP {
	return intToIP(new(big.Int).Add(ipToInt(ip), big.NewInt(1)), v4)
}

// normalizeIP keeps IPv4 addresses in their 4-byte form.
func normalizeIP(ip net.IP) net.IP {
	if v4 := ip.To4(); v4 != nil {
		return v4
	}
	return ip
}

// validateSubnet checks one requested subnet: a network address with a
// prefix that leaves room for a gateway and a container, a gateway and a
// lease range inside it. It fills in the default gateway (the first
// address) when the network is not internal-without-gateway.
func validateSubnet(s *core.Subnet, field string) error {
	n := &s.Subnet.IPNet
	if n.IP == nil || n.Mask == nil {
		return core.InvalidArgument(field, errors.New("a subnet needs an address and a prefix length"))
	}
	ones, bits := n.Mask.Size()
	if bits == 0 {
		return core.InvalidArgument(field, fmt.Errorf("%s has no valid prefix", n))
	}
	if bits-ones < 2 {
		return core.InvalidArgument(field, fmt.Errorf("prefix length /%d of %s leaves no room for a gateway and a container", ones, n))
	}
	if !n.IP.Equal(n.IP.Mask(n.Mask)) {
		return core.InvalidArgument(field, fmt.Errorf("%s is not a network address (%s)", n, n.IP.Mask(n.Mask)))
	}
	v4 := isIPv4(n)
	first := nextIP(n.IP, v4)
	if s.Gateway == nil {
		s.Gateway = first
	}
	s.Gateway = normalizeIP(s.Gateway)
	if !n.Contains(s.Gateway) || s.Gateway.Equal(n.IP) || (v4 && s.Gateway.Equal(lastIP(n))) {
		return core.InvalidArgument("gateway", fmt.Errorf("gateway %s is not a host address of subnet %s", s.Gateway, n))
	}
	if lr := s.LeaseRange; lr != nil {
		if lr.StartIP != nil {
			lr.StartIP = normalizeIP(lr.StartIP)
			if !n.Contains(lr.StartIP) {
				return core.InvalidArgument("lease_range", fmt.Errorf("start %s is outside subnet %s", lr.StartIP, n))
			}
		}
		if lr.EndIP != nil {
			lr.EndIP = normalizeIP(lr.EndIP)
			if !n.Contains(lr.EndIP) {
				return core.InvalidArgument("lease_range", fmt.Errorf("end %s is outside subnet %s", lr.EndIP, n))
			}
		}
		if lr.StartIP != nil && lr.EndIP != nil && ipToInt(lr.StartIP).Cmp(ipToInt(lr.EndIP)) > 0 {
			return core.InvalidArgument("lease_range", fmt.Errorf("start %s is after end %s", lr.StartIP, lr.EndIP))
		}
		if lr.StartIP == nil && lr.EndIP == nil {
			s.LeaseRange = nil
		}
	}
	return nil
}

// pickAddress returns a free host address of a subnet's lease range: not
// the network address, the gateway, the IPv4 broadcast, or an address in
// used. As Podman's IPAM, it takes the first free one after last (the
// address this pool handed out last; nil for none), wrapping around to the
// range's start, so that an address just released is the last to be
// handed out again.
func pickAddress(s core.Subnet, used map[string]bool, last net.IP) (net.IP, error) {
	n := &s.Subnet.IPNet
	v4 := isIPv4(n)
	start := nextIP(n.IP, v4)
	end := lastIP(n)
	if v4 {
		end = intToIP(new(big.Int).Sub(ipToInt(end), big.NewInt(1)), true)
	}
	if lr := s.LeaseRange; lr != nil {
		if lr.StartIP != nil && ipToInt(lr.StartIP).Cmp(ipToInt(start)) > 0 {
			start = lr.StartIP
		}
		if lr.EndIP != nil && ipToInt(lr.EndIP).Cmp(ipToInt(end)) < 0 {
			end = lr.EndIP
		}
	}
	startInt, endInt := ipToInt(start), ipToInt(end)
	first := start
	if last != nil {
		if l := ipToInt(normalizeIP(last)); l.Cmp(startInt) >= 0 && l.Cmp(endInt) < 0 {
			first = nextIP(normalizeIP(last), v4)
		}
	}
	// Of any len(used)+2 addresses in a row one is free (only the gateway
	// and used ones are not), so the walk ends after that many steps, or
	// where it comes round to where it began (a range that small is full).
	ip := first
	for i := 0; i <= len(used)+2; i++ {
		if !ip.Equal(s.Gateway) && !used[ip.String()] {
			return ip, nil
		}
		if ip = nextIP(ip, v4); ipToInt(ip).Cmp(endInt) > 0 {
			ip = start
		}
		if ip.Equal(first) {
			break
		}
	}
	return nil, fmt.Errorf("no free address left in subnet %s: %w", n, core.ErrAddressInUse)
}

// checkStaticAddress checks that a requested address may be leased on s.
func checkStaticAddress(s core.Subnet, ip net.IP) error {
	n := &s.Subnet.IPNet
	if ip.Equal(n.IP) || ip.Equal(s.Gateway) || (isIPv4(n) && ip.Equal(lastIP(n))) {
		return core.InvalidArgument("static_ips", fmt.Errorf("%s is not a host address for a container in %s", ip, n))
	}
	return nil
}

// hostRoutes reads the subnets the host routes to (IPv4 and IPv6), except
// default routes, and loopback: a new network must not shadow any of them.
func hostRoutes() []*net.IPNet {
	out := []*net.IPNet{{IP: net.IPv4(127, 0, 0, 0).To4(), Mask: net.CIDRMask(8, 32)}}
	if f, err := os.Open("/proc/net/route"); err == nil {
		sc := bufio.NewScanner(f)
		sc.Scan()
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 8 {
				continue
			}
			dst, err1 := hex.DecodeString(fields[1])
			mask, err2 := hex.DecodeString(fields[7])
			if err1 != nil || err2 != nil || len(dst) != 4 || len(mask) != 4 {
				continue
			}
			// /proc/net/route writes addresses in host (little-endian) order.
			ip := net.IPv4(dst[3], dst[2], dst[1], dst[0]).To4()
			m := net.IPv4Mask(mask[3], mask[2], mask[1], mask[0])
			if ones, _ := m.Size(); ones == 0 {
				continue
			}
			out = append(out, &net.IPNet{IP: ip.Mask(m), Mask: m})
		}
		f.Close()
	}
	if f, err := os.Open("/proc/net/ipv6_route"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 {
				continue
			}
			dst, err := hex.DecodeString(fields[0])
			if err != nil || len(dst) != 16 {
				continue
			}
			var plen int
			fmt.Sscanf(fields[1], "%x", &plen)
			// Default, link-local and host routes say nothing about subnets.
			if plen == 0 || plen == 128 || (dst[0] == 0xfe && dst[1]&0xc0 == 0x80) || dst[0] == 0xff {
				continue
			}
			m := net.CIDRMask(plen, 128)
			out = append(out, &net.IPNet{IP: net.IP(dst).Mask(m), Mask: m})
		}
		f.Close()
	}
	return out
}

// randomULA returns a random fdXX:XXXX:XXXX:XXXX::/64 subnet.
func randomULA() *net.IPNet {
	ip := make(net.IP, net.IPv6len)
	ip[0] = 0xfd
	rand.Read(ip[1:8])
	return &net.IPNet{IP: ip, Mask: net.CIDRMask(64, 128)}
}

// poolSubnets enumerates the /size subnets of a pool in order.
func poolSubnets(pool *net.IPNet, size int, yield func(*net.IPNet) bool) {
	ones, bits := pool.Mask.Size()
	if size < ones || size > bits {
		return
	}
	v4 := isIPv4(pool)
	step := new(big.Int).Lsh(big.NewInt(1), uint(bits-size))
	count := new(big.Int).Lsh(big.NewInt(1), uint(size-ones))
	cur := ipToInt(pool.IP)
	for i := big.NewInt(0); i.Cmp(count) < 0; i.Add(i, big.NewInt(1)) {
		n := &net.IPNet{IP: intToIP(cur, v4), Mask: net.CIDRMask(size, bits)}
		if !yield(n) {
			return
		}
		cur = new(big.Int).Add(cur, step)
	}
}
