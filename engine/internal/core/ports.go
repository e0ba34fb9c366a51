package core

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// ParsePortMapping reads a published port, as podman run -p writes it: [[ip:][hostPort[-end]]:]containerPort[-end][/protocol].
func ParsePortMapping(v string) (PortMapping, error) {
	pm := PortMapping{Protocol: "tcp"}
	rest := v
	if spec, proto, ok := strings.Cut(v, "/"); ok {
		switch proto {
		case "tcp", "udp", "sctp":
		default:
			return pm, fmt.Errorf("%q: protocol %q is not tcp, udp or sctp", v, proto)
		}
		pm.Protocol, rest = proto, spec
	}
	if strings.HasPrefix(rest, "[") {
		end := strings.Index(rest, "]:")
		if end < 0 {
			return pm, fmt.Errorf("%q: unterminated IPv6 address", v)
		}
		pm.HostIP, rest = rest[1:end], rest[end+2:]
		if net.ParseIP(pm.HostIP) == nil {
			return pm, fmt.Errorf("%q: %q is not an IP address", v, pm.HostIP)
		}
		if !strings.Contains(rest, ":") {
			return pm, fmt.Errorf("%q: an address needs a host port field", v)
		}
	}
	parts := strings.Split(rest, ":")
	var host, ctr string
	switch len(parts) {
	case 1:
		ctr = parts[0]
	case 2:
		host, ctr = parts[0], parts[1]
	case 3:
		if pm.HostIP != "" {
			return pm, fmt.Errorf("%q is not a port mapping", v)
		}
		pm.HostIP, host, ctr = parts[0], parts[1], parts[2]
		if net.ParseIP(pm.HostIP) == nil {
			return pm, fmt.Errorf("%q: %q is not an IP address", v, pm.HostIP)
		}
	default:
		return pm, fmt.Errorf("%q is not a port mapping", v)
	}
	ctrStart, ctrCount, err := portRange(ctr)
	if err != nil {
		return pm, fmt.Errorf("%q: container port: %w", v, err)
	}
	pm.ContainerPort, pm.Range = ctrStart, ctrCount
	if host != "" {
		hostStart, hostCount, err := portRange(host)
		if err != nil {
			return pm, fmt.Errorf("%q: host port: %w", v, err)
		}
		if hostCount != ctrCount {
			return pm, fmt.Errorf("%q: the host and container ranges differ in length", v)
		}
		pm.HostPort = hostStart
	}
	if pm.Range == 1 {
		pm.Range = 0
	}
	return pm, nil
}

// portRange reads PORT or START-END (1-65535).
func portRange(s string) (uint16, uint16, error) {
	a, b, isRange := strings.Cut(s, "-")
	start, err := strconv.ParseUint(a, 10, 16)
	if err != nil || start == 0 {
		return 0, 0, fmt.Errorf("%q is not a port", s)
	}
	if !isRange {
		return uint16(start), 1, nil
	}
	end, err := strconv.ParseUint(b, 10, 16)
	if err != nil || end < start {
		return 0, 0, fmt.Errorf("%q is not a port range", s)
	}
	return uint16(start), uint16(end - start + 1), nil
}
