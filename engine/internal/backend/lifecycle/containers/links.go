package containers

import (
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"

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

// linkHosts are the /etc/hosts lines of rec's links.
func (m *Manager) linkHosts(rec *record) string {
	var b strings.Builder
	for _, l := range rec.Spec.Links {
		e, err := m.lookup(l.Container)
		if err != nil {
			continue
		}
		linked := m.snapshot(e)
		if linked.NetSetup == nil {
			continue // no network: it does not run
		}
		ip := linkAddress(&linked, rec.Spec.Networks)
		if ip == nil {
			continue
		}
		names := []string{l.Alias}
		for _, n := range []string{hostnameOf(&linked), linked.Name} {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
		fmt.Fprintf(&b, "%s\t%s\n", ip, strings.Join(names, " "))
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
