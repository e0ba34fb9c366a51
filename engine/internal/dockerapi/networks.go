package dockerapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	networktypes "github.com/docker/docker/api/types/network"

	"github.com/berth-project/berth/engine/internal/core"
)

// dockerNetwork is a network as Docker's list and inspect show it.
func (s *server) dockerNetwork(n *core.Network, containers map[string]core.NetworkContainer) networktypes.Inspect {
	out := networktypes.Inspect{
		Name: s.dockerNetworkName(n.Name), ID: n.ID, Created: n.Created, Scope: "local", Driver: n.Driver,
		EnableIPv4: true, EnableIPv6: n.IPv6Enabled, Internal: n.Internal,
		IPAM:    networktypes.IPAM{Driver: "default", Options: map[string]string{}, Config: []networktypes.IPAMConfig{}},
		Options: n.Options, Labels: n.Labels, Containers: map[string]networktypes.EndpointResource{},
	}
	if out.Options == nil {
		out.Options = map[string]string{}
	}
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	switch {
	case n.Docker != nil:
		// Made through this API: its options as the client gave them.
		out.Attachable = n.Docker.Attachable
		out.Options = map[string]string{}
		for k, v := range n.Docker.Options {
			out.Options[k] = v
		}
	case n.Driver == "macvlan":
		// Docker's names of a macvlan network's parent and mode.
		opts := map[string]string{"parent": n.NetworkInterface}
		if mode := n.Options["mode"]; mode != "" {
			opts["macvlan_mode"] = mode
		}
		if mtu := n.Options["mtu"]; mtu != "" {
			opts["com.docker.network.driver.mtu"] = mtu
		}
		out.Options = opts
	case n.NetworkInterface != "":
		out.Options["com.docker.network.bridge.name"] = n.NetworkInterface
	}
	for _, sn := range n.Subnets {
		c := networktypes.IPAMConfig{Subnet: sn.Subnet.String()}
		if sn.Gateway != nil {
			c.Gateway = sn.Gateway.String()
		}
		if sn.LeaseRange != nil {
			c.IPRange = rangeCIDR(sn.LeaseRange)
		}
		out.IPAM.Config = append(out.IPAM.Config, c)
	}
	for id, c := range containers {
		ep := networktypes.EndpointResource{Name: c.Name, EndpointID: endpointID(id, n.ID)}
		for _, iface := range c.Interfaces {
			ep.MacAddress = net.HardwareAddr(iface.MacAddress).String()
			for _, a := range iface.Subnets {
				if a.IPNet.IP.To4() != nil {
					ep.IPv4Address = a.IPNet.String()
				} else {
					ep.IPv6Address = a.IPNet.String()
				}
			}
			break
		}
		out.Containers[id] = ep
	}
	return out
}

// networkFilterKeys are the keys docker network ls takes: dockerd's and
// the engine's until and label! besides.
var networkFilterKeys = []string{"dangling", "driver", "id", "label", "label!", "name", "scope", "type", "until"}

// listedNetworks are the Docker filters of a network listing, split into
// what the engine's listing applies (engine) and what only this front door
// knows: the type (builtin, custom), the scope and whether dangling ones
// (true) or used ones (false) are asked for, which dockerd answers for its
// predefined networks (bridge, host, none) as always used.
type listedNetworks struct {
	engine   map[string][]string
	types    []string
	scopes   []string
	dangling map[bool]bool
}

// networkFilters reads Docker's network filters with dockerd's words for
// what it refuses.
func (s *server) networkFilters(f map[string][]string) (listedNetworks, error) {
	out := listedNetworks{engine: map[string][]string{}}
	for k, vs := range f {
		switch k {
		case "type":
			for _, v := range vs {
				if v != "custom" && v != "builtin" {
					return out, core.InvalidArgument("filters", fmt.Errorf("invalid filter: 'type'='%s'", v))
				}
			}
			out.types = vs
		case "scope":
			out.scopes = vs
		case "dangling":
			out.dangling = map[bool]bool{}
			for _, v := range vs {
				switch v {
				case "true", "1":
					out.dangling[true] = true
				case "false", "0":
					out.dangling[false] = true
				default:
					return out, core.InvalidArgument("filters", errors.New(`invalid value for filter 'dangling', must be "true" (or "1"), or "false" (or "0")`))
				}
			}
		case "name", "id":
			for _, v := range vs {
				out.engine[k] = append(out.engine[k], s.engineNetwork(v))
			}
		default:
			if !slices.Contains(networkFilterKeys, k) {
				return out, core.InvalidArgument("filters", fmt.Errorf("Invalid filter '%s'", k))
			}
			out.engine[k] = vs
		}
	}
	return out, nil
}

// keeps reports whether the filters that only this front door applies
// keep a network, predefined or not; inUse is asked only for dangling.
func (l listedNetworks) keeps(predefined bool, inUse func() bool) bool {
	kind := "custom"
	if predefined {
		kind = "builtin"
	}
	if len(l.types) > 0 && !slices.Contains(l.types, kind) {
		return false
	}
	if len(l.scopes) > 0 && !slices.Contains(l.scopes, "local") {
		return false
	}
	return l.dangling == nil || l.dangling[!(predefined || inUse())]
}

// networkList answers docker network ls: the engine's networks with
// dockerd's host and none.
func (s *server) networkList(w http.ResponseWriter, r *http.Request) {
	raw, ok := filtersOf(w, r)
	if !ok {
		return
	}
	f, err := s.networkFilters(raw)
	if err != nil {
		// dockerd's words alone, without the engine's "invalid filters: ".
		writeMessage(w, http.StatusBadRequest, errors.Unwrap(err).Error())
		return
	}
	list, err := s.deps.Networks.List(r.Context(), f.engine)
	if err != nil {
		writeError(w, err)
		return
	}
	var used map[string]bool
	if f.dangling != nil {
		withDangling := maps.Clone(f.engine)
		withDangling["dangling"] = []string{"false"}
		inUse, err := s.deps.Networks.List(r.Context(), withDangling)
		if err != nil {
			writeError(w, err)
			return
		}
		used = map[string]bool{}
		for _, n := range inUse {
			used[n.ID] = true
		}
	}
	out := []networktypes.Summary{}
	for _, n := range list {
		if f.keeps(n.Name == s.cfg.DefaultNetwork, func() bool { return used[n.ID] }) {
			out = append(out, s.dockerNetwork(n, nil))
		}
	}
	if f.keeps(true, nil) {
		for _, n := range s.hostAndNone(r.Context()) {
			if predefinedMatches(n, f.engine) {
				out = append(out, n)
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// hostAndNone are dockerd's predefined host and none networks, which the
// engine keeps no record of (a container's network mode names them): they
// are listed and inspected as dockerd shows them, so a client that looks
// for them (Compose, for an external network named host) finds them. Their
// IDs are fixed; they are as old as the engine's default network.
func (s *server) hostAndNone(ctx context.Context) []networktypes.Inspect {
	var created time.Time
	if def, err := s.deps.Networks.Inspect(ctx, s.cfg.DefaultNetwork); err == nil {
		created = def.Created
	}
	out := make([]networktypes.Inspect, 0, 2)
	for _, n := range [][2]string{{"host", "host"}, {"none", "null"}} {
		out = append(out, networktypes.Inspect{
			Name: n[0], ID: predefinedNetworkID(n[0]), Created: created, Scope: "local", Driver: n[1],
			IPAM:    networktypes.IPAM{Driver: "default", Config: []networktypes.IPAMConfig{}},
			Options: map[string]string{}, Labels: map[string]string{}, Containers: map[string]networktypes.EndpointResource{},
		})
	}
	return out
}

// predefinedNetworkID is the fixed ID of dockerd's predefined network name
// (host or none).
func predefinedNetworkID(name string) string {
	id := sha256.Sum256([]byte("berth predefined network " + name))
	return hex.EncodeToString(id[:])
}

// predefinedMatches reports whether the engine's filters f keep the
// predefined network n (one with no labels), read as the engine reads them.
func predefinedMatches(n networktypes.Inspect, f map[string][]string) bool {
	for k, vs := range f {
		var ok bool
		switch k {
		case "name":
			ok = slices.ContainsFunc(vs, func(v string) bool {
				re, err := regexp.Compile(v)
				return v == n.Name || err == nil && re.MatchString(n.Name)
			})
		case "id":
			ok = slices.ContainsFunc(vs, func(v string) bool { return strings.HasPrefix(n.ID, v) })
		case "driver":
			ok = slices.Contains(vs, n.Driver)
		case "label":
			ok = len(vs) == 0
		default: // label!: a network without labels has none of them; until
			ok = true
		}
		if !ok {
			return false
		}
	}
	return true
}

// predefinedNetwork is dockerd's host or none network that name or ID
// names, or nil.
func (s *server) predefinedNetwork(ctx context.Context, nameOrID string) *networktypes.Inspect {
	if nameOrID != "host" && nameOrID != "none" && len(nameOrID) < 12 {
		return nil
	}
	for _, n := range s.hostAndNone(ctx) {
		if n.Name == nameOrID || n.ID == nameOrID || strings.HasPrefix(n.ID, nameOrID) {
			return &n
		}
	}
	return nil
}

// networkInspect answers docker network inspect.
func (s *server) networkInspect(w http.ResponseWriter, r *http.Request) {
	name := s.engineNetwork(pathParam(r, "name"))
	n, err := s.deps.Networks.Inspect(r.Context(), name)
	if err != nil {
		if errors.Is(err, core.ErrNoSuchNetwork) {
			if n := s.predefinedNetwork(r.Context(), pathParam(r, "name")); n != nil {
				writeJSON(w, http.StatusOK, n)
				return
			}
			writeMessage(w, http.StatusNotFound, "network "+pathParam(r, "name")+" not found")
			return
		}
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.dockerNetwork(&n.Network, n.Containers))
}

// networkCreate answers docker network create.
func (s *server) networkCreate(w http.ResponseWriter, r *http.Request) {
	var req networktypes.CreateRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.Name == "bridge" || req.Name == "host" || req.Name == "none" || req.Name == "default" {
		// dockerd's words, trailing space included; clients match on them.
		writeMessage(w, http.StatusForbidden, fmt.Sprintf("operation is not permitted on predefined %s network ", req.Name))
		return
	}
	n, err := networkFromRequest(req)
	if err != nil {
		writeError(w, err)
		return
	}
	created, err := s.deps.Networks.Create(r.Context(), n, false)
	if err != nil {
		if errors.Is(err, core.ErrNameInUse) {
			writeMessage(w, http.StatusConflict, "network with name "+req.Name+" already exists")
			return
		}
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, networktypes.CreateResponse{ID: created.ID})
}

// networkFromRequest translates Docker's network create body into the
// engine's network; what the engine cannot honour is a 400 naming the
// member.
func networkFromRequest(req networktypes.CreateRequest) (core.Network, error) {
	if req.Name == "" {
		return core.Network{}, core.InvalidArgument("Name", errors.New("a network name is required"))
	}
	switch {
	case req.Driver != "" && req.Driver != "bridge" && req.Driver != "macvlan":
		return core.Network{}, core.InvalidArgument("Driver", fmt.Errorf("network driver %q is not supported (bridge, macvlan)", req.Driver))
	case req.Scope != "" && req.Scope != "local":
		return core.Network{}, core.InvalidArgument("Scope", fmt.Errorf("scope %q is not supported (local)", req.Scope))
	case req.Ingress:
		return core.Network{}, core.InvalidArgument("Ingress", errors.New("ingress networks are swarm networks, which are not supported"))
	case req.ConfigOnly || req.ConfigFrom != nil:
		return core.Network{}, core.InvalidArgument("ConfigOnly", errors.New("configuration-only networks (ConfigOnly, ConfigFrom) are not supported"))
	case req.EnableIPv4 != nil && !*req.EnableIPv4:
		return core.Network{}, core.InvalidArgument("EnableIPv4", errors.New("IPv6-only networks are not supported"))
	}
	// Attachable (Compose v1 sends it for every network) limits only
	// swarm-scoped networks; a local one takes any container, as dockerd's.
	n := core.Network{Name: req.Name, Driver: "bridge", Internal: req.Internal, Labels: req.Labels, DNSEnabled: true,
		Docker: &core.DockerNetworkRequest{Options: req.Options, Attachable: req.Attachable}}
	macvlan := req.Driver == "macvlan"
	if macvlan {
		// The network backend checks the parent and mode, and turns DNS
		// off (netavark serves none on macvlan).
		n.Driver = "macvlan"
	}
	if req.EnableIPv6 != nil {
		n.IPv6Enabled = *req.EnableIPv6
	}
	for k, v := range req.Options {
		switch {
		case macvlan && k == "parent":
			n.NetworkInterface = v
		case macvlan && k == "macvlan_mode":
			if n.Options == nil {
				n.Options = map[string]string{}
			}
			n.Options["mode"] = v
		case !macvlan && k == "com.docker.network.bridge.name":
			n.NetworkInterface = v
		case k == "com.docker.network.driver.mtu":
			if n.Options == nil {
				n.Options = map[string]string{}
			}
			n.Options["mtu"] = v
		default:
			return core.Network{}, core.InvalidArgument("Options", fmt.Errorf("network option %q is not supported", k))
		}
	}
	if req.IPAM == nil {
		return n, nil
	}
	subnets, err := ipamSubnets(req.IPAM)
	if err != nil {
		return core.Network{}, err
	}
	n.Subnets = subnets
	return n, nil
}

// ipamSubnets translates Docker's IPAM block: each subnet with its
// gateway and its lease range, a CIDR block inside the subnet.
func ipamSubnets(ipam *networktypes.IPAM) ([]core.Subnet, error) {
	if ipam.Driver != "" && ipam.Driver != "default" {
		return nil, core.InvalidArgument("IPAM.Driver", fmt.Errorf("IPAM driver %q is not supported", ipam.Driver))
	}
	if len(ipam.Options) > 0 {
		return nil, core.InvalidArgument("IPAM.Options", errors.New("IPAM options are not supported"))
	}
	var subnets []core.Subnet
	for _, c := range ipam.Config {
		if len(c.AuxAddress) > 0 {
			return nil, core.InvalidArgument("IPAM.Config.AuxiliaryAddresses", errors.New("auxiliary addresses are not supported"))
		}
		sn, err := core.ParseIPNet(c.Subnet)
		if err != nil {
			return nil, core.InvalidArgument("IPAM.Config.Subnet", fmt.Errorf("%q is not a CIDR subnet", c.Subnet))
		}
		sub := core.Subnet{Subnet: sn}
		if c.Gateway != "" {
			if sub.Gateway = net.ParseIP(c.Gateway); sub.Gateway == nil {
				return nil, core.InvalidArgument("IPAM.Config.Gateway", fmt.Errorf("%q is not an IP address", c.Gateway))
			}
		}
		if c.IPRange != "" {
			_, rng, err := net.ParseCIDR(c.IPRange)
			if err != nil {
				return nil, core.InvalidArgument("IPAM.Config.IPRange", fmt.Errorf("%q is not a CIDR range", c.IPRange))
			}
			// Docker's range is a CIDR block; the engine's (netavark's)
			// a first and a last address.
			if !sn.IPNet.Contains(rng.IP) || !sn.IPNet.Contains(lastAddress(rng)) {
				return nil, core.InvalidArgument("IPAM.Config.IPRange", fmt.Errorf("%s is not inside subnet %s", c.IPRange, c.Subnet))
			}
			sub.LeaseRange = &core.LeaseRange{StartIP: rng.IP, EndIP: lastAddress(rng)}
		}
		subnets = append(subnets, sub)
	}
	return subnets, nil
}

// networkRemove answers docker network rm.
func (s *server) networkRemove(w http.ResponseWriter, r *http.Request) {
	name := pathParam(r, "name")
	engineName := s.engineNetwork(name)
	if engineName == s.cfg.DefaultNetwork || name == "host" || name == "none" {
		writeMessage(w, http.StatusForbidden, name+" is a pre-defined network and cannot be removed")
		return
	}
	if err := s.deps.Networks.Remove(r.Context(), engineName, false, nil); err != nil {
		switch {
		case errors.Is(err, core.ErrNoSuchNetwork):
			writeMessage(w, http.StatusNotFound, "network "+name+" not found")
		case errors.Is(err, core.ErrNetworkInUse):
			writeMessage(w, http.StatusForbidden, s.activeEndpoints(r.Context(), name, engineName))
		default:
			writeError(w, err)
		}
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// activeEndpoints is dockerd's refusal to remove a network containers are
// attached to (a 403), naming them as dockerd does.
func (s *server) activeEndpoints(ctx context.Context, name, engineName string) string {
	var attached []string
	if n, err := s.deps.Networks.Inspect(ctx, engineName); err == nil {
		for id, c := range n.Containers {
			attached = append(attached, fmt.Sprintf("name:%q id:%q", c.Name, id[:min(12, len(id))]))
		}
	}
	slices.Sort(attached)
	return fmt.Sprintf("error while removing network: network %s has active endpoints (%s)", name, strings.Join(attached, ", "))
}

// networkConnect answers docker network connect.
func (s *server) networkConnect(w http.ResponseWriter, r *http.Request) {
	var req networktypes.ConnectOptions
	s.changeMembership(w, r, &req, &req.Container, func(ctx context.Context, network string) error {
		opts, err := endpointOptions("EndpointConfig.", req.EndpointConfig)
		if err != nil {
			return err
		}
		return s.deps.Networks.Connect(ctx, network, req.Container, opts)
	})
}

// networkDisconnect answers docker network disconnect.
func (s *server) networkDisconnect(w http.ResponseWriter, r *http.Request) {
	var req networktypes.DisconnectOptions
	s.changeMembership(w, r, &req, &req.Container, func(ctx context.Context, network string) error {
		return s.deps.Networks.Disconnect(ctx, network, req.Container, req.Force)
	})
}

// changeMembership answers a connect or disconnect: it decodes the body
// into req, which must name a container (*container), and applies change
// to the network of the path.
func (s *server) changeMembership(w http.ResponseWriter, r *http.Request, req any, container *string, change func(ctx context.Context, network string) error) {
	if err := decodeBody(r, req); err != nil {
		writeError(w, err)
		return
	}
	if *container == "" {
		writeError(w, core.InvalidArgument("Container", errors.New("a container is required")))
		return
	}
	finishStatus(w, http.StatusOK, change(r.Context(), s.engineNetwork(pathParam(r, "name"))))
}

// networkPrune answers docker network prune.
func (s *server) networkPrune(w http.ResponseWriter, r *http.Request) {
	f, ok := filtersOf(w, r)
	if !ok {
		return
	}
	reports, err := s.deps.Networks.Prune(r.Context(), f)
	if err != nil {
		writeError(w, err)
		return
	}
	out := networktypes.PruneReport{NetworksDeleted: []string{}}
	for _, p := range reports {
		if p.Error == "" {
			out.NetworksDeleted = append(out.NetworksDeleted, p.Name)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// endpointOptions translates a Docker endpoint (of a create's
// NetworkingConfig or a network connect) into the engine's options for
// that network: aliases, static addresses and legacy links.
// field prefixes the names of refused fields.
func endpointOptions(field string, ep *networktypes.EndpointSettings) (core.PerNetworkOptions, error) {
	opts := core.PerNetworkOptions{}
	if ep == nil {
		return opts, nil
	}
	links, err := parseLinks(field+"Links", ep.Links)
	if err != nil {
		return opts, err
	}
	opts.Links = links
	opts.Aliases = ep.Aliases
	if ep.IPAMConfig != nil {
		if len(ep.IPAMConfig.LinkLocalIPs) > 0 {
			// docker run --link-local-ip: netavark assigns none.
			return opts, core.InvalidArgument(field+"IPAMConfig.LinkLocalIPs", errors.New("link-local addresses are not supported"))
		}
		for _, a := range []string{ep.IPAMConfig.IPv4Address, ep.IPAMConfig.IPv6Address} {
			if a == "" {
				continue
			}
			ip := net.ParseIP(a)
			if ip == nil {
				return opts, core.InvalidArgument(field+"IPAMConfig", fmt.Errorf("%q is not an IP address", a))
			}
			opts.StaticIPs = append(opts.StaticIPs, ip)
		}
	}
	return opts, nil
}

// lastAddress is the highest address of n.
func lastAddress(n *net.IPNet) net.IP {
	ip := make(net.IP, len(n.IP))
	for i := range n.IP {
		ip[i] = n.IP[i] | ^n.Mask[i]
	}
	return ip
}

// rangeCIDR writes a lease range as Docker's IPRange: the CIDR block it
// covers, or "" where it is not one (a range set through libpod).
func rangeCIDR(lr *core.LeaseRange) string {
	start, end := lr.StartIP, lr.EndIP
	if start == nil || end == nil {
		return ""
	}
	if v4 := start.To4(); v4 != nil {
		start = v4
	}
	if v4 := end.To4(); v4 != nil {
		end = v4
	}
	if len(start) != len(end) {
		return ""
	}
	bits := len(start) * 8
	for ones := 0; ones <= bits; ones++ {
		n := &net.IPNet{IP: start.Mask(net.CIDRMask(ones, bits)), Mask: net.CIDRMask(ones, bits)}
		if n.IP.Equal(start) && lastAddress(n).Equal(end) {
			return n.String()
		}
	}
	return ""
}
