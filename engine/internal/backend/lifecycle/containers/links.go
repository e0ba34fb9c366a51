package containers

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/berth-project/berth/engine/internal/backend/execution/oci"
	"github.com/berth-project/berth/engine/internal/core"
)

// Legacy links (Docker's HostConfig.Links, see core.ContainerLink): a
// linked container is recorded by ID when the link is made and must exist
// then, with a network of its own; each time the linking container's
// network files are written, every linked container that runs stands in
// its /etc/hosts at its address on a network the two share (else its first
// IPv4 address), and a linked container that starts (perhaps with another
// address) rewrites the files of the running containers that link to it.
// A linked container without its network (it does not run), or gone, is
// left out.
//
// On the default network, as on dockerd's default bridge, a link also
// gives the linking container environment variables, made at each of its
// starts (linkEnv): ALIAS_NAME, ALIAS_PORT and for each port the linked
// container exposes ALIAS_PORT_<port>_<PROTO> with its _ADDR, _PORT and
// _PROTO (and _START/_END around runs of consecutive ports), and
// ALIAS_ENV_<name> for each of its variables but HOME, PATH and those the
// engine adds (HOSTNAME, TERM, container), as dockerd gives them. Variables
// the container sets itself win.

// linkAlias is what an alias may be: it is written into /etc/hosts.
var linkAlias = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,252}$`)

// resolveLinks checks links and records each linked container by ID; a
// bad alias or an unknown container is a 400 naming the member.
func (m *Manager) resolveLinks(links []core.ContainerLink) ([]core.ContainerLink, error) {
	out := make([]core.ContainerLink, 0, len(links))
	for _, l := range links {
		if !linkAlias.MatchString(l.Alias) {
			return nil, core.InvalidArgument("links", fmt.Errorf("alias %q of the link to %q is not a host name", l.Alias, l.Container))
		}
		linked, err := m.lookupDonor("links", l.Container)
		if err != nil {
			return nil, err
		}
		if !bridged(&linked.Spec) {
			return nil, core.InvalidArgument("links", fmt.Errorf("container %s has network mode %s: it has no address of its own to link to", linked.Name, netMode(&linked.Spec)))
		}
		for _, o := range out {
			if o.Alias == l.Alias && o.Container != linked.ID {
				return nil, core.InvalidArgument("links", fmt.Errorf("alias %q names two containers", l.Alias))
			}
		}
		if r := (core.ContainerLink{Container: linked.ID, Alias: l.Alias}); !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out, nil
}

// mergeLinks adds a connect's links to those a container has.
func (m *Manager) mergeLinks(have, more []core.ContainerLink) ([]core.ContainerLink, error) {
	return m.resolveLinks(append(slices.Clone(have), more...))
}

// upLink is a link whose container runs, with its address.
type upLink struct {
	core.ContainerLink
	linked record
	ip     net.IP
}

// upLinks are rec's links whose containers run (have their network) and
// have an address.
func (m *Manager) upLinks(rec *record) []upLink {
	var out []upLink
	for _, l := range rec.Spec.Links {
		e, err := m.lookup(l.Container)
		if err != nil {
			continue
		}
		linked := m.snapshot(e)
		if linked.NetSetup == nil {
			continue // no network: it does not run
		}
		if ip := linkAddress(&linked, rec.Spec.Networks); ip != nil {
			out = append(out, upLink{ContainerLink: l, linked: linked, ip: ip})
		}
	}
	return out
}

// linkHosts are the /etc/hosts lines of rec's links.
func (m *Manager) linkHosts(rec *record) string {
	var b strings.Builder
	for _, l := range m.upLinks(rec) {
		names := []string{l.Alias}
		for _, n := range []string{hostnameOf(&l.linked), l.linked.Name} {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
		fmt.Fprintf(&b, "%s\t%s\n", l.ip, strings.Join(names, " "))
	}
	return b.String()
}

// refreshLinkers rewrites the network files of the running containers
// that link to id, which has just got its addresses. A failure is logged:
// the linked container's start does not depend on its linkers.
func (m *Manager) refreshLinkers(id string) {
	var linkers []*entry
	m.mu.RLock()
	for _, e := range m.byID {
		if e.removed || e.rec.NetSetup == nil || (e.rec.State != core.StateRunning && e.rec.State != core.StatePaused) {
			continue
		}
		for _, l := range e.rec.Spec.Links {
			if l.Container == id {
				linkers = append(linkers, e)
				break
			}
		}
	}
	m.mu.RUnlock()
	for _, e := range linkers {
		rec := m.snapshot(e)
		if err := m.writeNetworkFiles(rec); err != nil {
			m.logger.Warn("rewrite the hosts file of a linking container", "container", rec.ID, "linked", id, "err", err)
		}
	}
}

// linkAddress is a linked container's IPv4 address on a network of nets,
// else its first.
func linkAddress(linked *record, nets map[string]core.PerNetworkOptions) net.IP {
	var first net.IP
	for _, name := range sortedKeys(linked.NetStatus) {
		for _, ifName := range sortedKeys(linked.NetStatus[name].Interfaces) {
			for _, a := range linked.NetStatus[name].Interfaces[ifName].Subnets {
				if a.IPNet.IP.To4() == nil {
					continue
				}
				if _, shared := nets[name]; shared {
					return a.IPNet.IP
				}
				if first == nil {
					first = a.IPNet.IP
				}
			}
		}
	}
	return first
}

// linksEnvOnStart reports whether rec's environment depends on its links:
// it has some and is on the default network.
func (m *Manager) linksEnvOnStart(rec *record) bool {
	if len(rec.Spec.Links) == 0 || m.nets == nil {
		return false
	}
	_, onDefault := rec.Spec.Networks[m.nets.DefaultNetwork()]
	return onDefault
}

// linkEnv is the environment rec's links give it (see above).
func (m *Manager) linkEnv(ctx context.Context, rec *record) []string {
	if !m.linksEnvOnStart(rec) {
		return nil
	}
	var env []string
	for _, l := range m.upLinks(rec) {
		env = append(env, linkVariables(l.Alias, "/"+rec.Name+"/"+l.Alias, l.ip.String(), m.linkedPorts(ctx, &l.linked), linkedEnv(&l.linked))...)
	}
	return env
}

// linkedPorts are the ports a linked container exposes: those its request
// names or publishes and those of its image; TCP first, then by number.
func (m *Manager) linkedPorts(ctx context.Context, linked *record) []portProto {
	ports := requestExposedPorts(linked)
	if m.images != nil {
		if img, err := m.images.Lookup(ctx, linked.ImageID); err == nil {
			for p := range img.Config.Config.ExposedPorts {
				num, proto, _ := strings.Cut(p, "/")
				if n, err := strconv.ParseUint(num, 10, 16); err == nil {
					ports = append(ports, portProto{uint16(n), cmp.Or(proto, "tcp")})
				}
			}
		}
	}
	slices.SortFunc(ports, func(a, b portProto) int {
		if (a.proto == "tcp") != (b.proto == "tcp") {
			if a.proto == "tcp" {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(a.proto, b.proto), cmp.Compare(a.port, b.port))
	})
	return slices.Compact(ports)
}

// linkedEnv is a linked container's environment as its process has it.
func linkedEnv(linked *record) []string {
	return oci.MergeEnv(linked.ImageEnv, &linked.Spec, hostnameOf(linked), "")
}

// linkVariables writes one link's variables (see above): alias as the
// linking container knows it, name its "/linking/alias", ip the linked
// container's address, ports sorted, env its environment.
func linkVariables(alias, name, ip string, ports []portProto, env []string) []string {
	prefix := strings.ReplaceAll(strings.ToUpper(path.Base(alias)), "-", "_")
	var out []string
	if len(ports) > 0 {
		out = append(out, fmt.Sprintf("%s_PORT=%s://%s:%d", prefix, ports[0].proto, ip, ports[0].port))
	}
	one := func(p portProto) {
		key := fmt.Sprintf("%s_PORT_%d_%s", prefix, p.port, strings.ToUpper(p.proto))
		out = append(out,
			fmt.Sprintf("%s=%s://%s:%d", key, p.proto, ip, p.port),
			fmt.Sprintf("%s_ADDR=%s", key, ip),
			fmt.Sprintf("%s_PORT=%d", key, p.port),
			fmt.Sprintf("%s_PROTO=%s", key, p.proto))
	}
	run := func(first, last portProto) {
		if first == last {
			return
		}
		key := fmt.Sprintf("%s_PORT_%d_%s", prefix, first.port, strings.ToUpper(first.proto))
		out = append(out,
			fmt.Sprintf("%s_START=%s://%s:%d", key, first.proto, ip, first.port),
			fmt.Sprintf("%s_PORT_START=%d", key, first.port),
			fmt.Sprintf("%s_PORT_END=%d", key, last.port),
			fmt.Sprintf("%s_PORT_%d_%s_END=%s://%s:%d", prefix, last.port, strings.ToUpper(last.proto), last.proto, ip, last.port))
	}
	for i, p := range ports {
		if i > 0 && !(p.proto == ports[i-1].proto && p.port == ports[i-1].port+1) {
			start := i - 1
			for start > 0 && ports[start-1].proto == ports[start].proto && ports[start-1].port+1 == ports[start].port {
				start--
			}
			run(ports[start], ports[i-1])
		}
		one(p)
	}
	if n := len(ports); n > 1 {
		start := n - 1
		for start > 0 && ports[start-1].proto == ports[start].proto && ports[start-1].port+1 == ports[start].port {
			start--
		}
		run(ports[start], ports[n-1])
	}
	out = append(out, fmt.Sprintf("%s_NAME=%s", prefix, name))
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "HOME" || k == "PATH" || k == "HOSTNAME" || k == "container" || k == "TERM" {
			continue
		}
		out = append(out, fmt.Sprintf("%s_ENV_%s=%s", prefix, k, v))
	}
	return out
}
