package network

import (
	"bytes"
	"context"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"github.com/berth-project/berth/engine/internal/backend/platform/words"
	"github.com/berth-project/berth/engine/internal/core"
)

// What a container's published ports leave when netavark cannot tear them
// down. netavark's iptables firewall (Debian 12's netavark 1.4) forwards a
// host port with rules in the nat table: in the network's chain
// NETAVARK-DN-<hash of the network ID>, two SETMARK rules (from the subnet
// and from the host itself) and a DNAT rule to the container's address;
// in NETAVARK-HOSTPORT-DNAT, a jump to that chain commented
// "dnat name: NETWORK-ID id: CONTAINER-ID". Its teardown removes them only
// in a namespace it can open, and only what it gets to: a teardown or
// setup cut by a kill -9 leaves part of them, and a container whose
// namespace is gone leaves all of them. The rules outlive the container and
// its network (the network's sweep removes the rules that name its subnet,
// not the chain's other rules), and a host port they forward is forwarded
// to whatever gets the container's address next.

// dnChain is the name of netavark's port-forwarding chain of a network.
func dnChain(networkID string) string {
	sum := sha512.Sum512([]byte(networkID))
	return "NETAVARK-DN-" + strings.ToUpper(hex.EncodeToString(sum[:]))[:13]
}

// removePortRules deletes the port-forwarding rules of container s on
// nets that are still in the nat table (IPv4 and IPv6). leased are the
// container's addresses by network ID, which tell its DNAT rules from
// another container's. The caller holds setupMu.
func (m *Manager) removePortRules(ctx context.Context, s core.NetworkSetup, nets map[string]*core.Network, leased map[string][]string) error {
	if len(s.PortMappings) == 0 || len(nets) == 0 {
		return nil
	}
	var errs []error
	for _, tool := range []string{"iptables", "ip6tables"} {
		listing, err := exec.CommandContext(ctx, tool, "-w", "-t", "nat", "-S").Output()
		if err != nil {
			// No such tool or table here: nothing of netavark's either.
			continue
		}
		for _, rule := range portRulesOf(string(listing), s, nets, leased) {
			args := append([]string{"-w", "-t", "nat", "-D"}, rule[1:]...)
			if out, err := exec.CommandContext(ctx, tool, args...).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("%s %s: %v: %s", tool, strings.Join(args, " "), err, bytes.TrimSpace(out)))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("remove the port forwarding of container %s: %w", s.ContainerID, errors.Join(errs...))
	}
	return nil
}

// portRulesOf picks from a nat table's rules, as "iptables -S" lists them,
// those of container s's published ports, each as its words ("-A", chain,
// options): its jumps (by the ID in their comment); in its networks'
// chains, the DNAT rules of its host ports to one of its leased addresses;
// and the SETMARK rules of those host ports where no other container's
// DNAT rule forwards the same port.
func portRulesOf(listing string, s core.NetworkSetup, nets map[string]*core.Network, leased map[string][]string) [][]string {
	// The container's addresses, by its networks' chains.
	addrs := map[string]map[string]bool{}
	for _, n := range nets {
		ips := map[string]bool{}
		for _, ip := range leased[n.ID] {
			ips[ip] = true
		}
		addrs[dnChain(n.ID)] = ips
	}
	ports := map[string]bool{}
	for _, p := range s.PortMappings {
		ports[hostPortMatch(p)] = true
	}
	type chainPort struct{ chain, port string }
	var rules [][]string
	othersDNAT := map[chainPort]bool{}
	var setmarks []struct {
		at   chainPort
		rule []string
	}
	for _, line := range strings.Split(listing, "\n") {
		w, err := words.Split(line, words.Rules{Separators: " ", Escapes: true})
		if err != nil || len(w) < 2 || w[0] != "-A" {
			continue
		}
		if w[1] == "NETAVARK-HOSTPORT-DNAT" {
			if strings.HasSuffix(optionOf(w, "--comment"), " id: "+s.ContainerID) {
				rules = append(rules, w)
			}
			continue
		}
		ips, ok := addrs[w[1]]
		if !ok {
			continue
		}
		at := chainPort{w[1], optionOf(w, "-p") + "/" + optionOf(w, "--dport")}
		if !ports[at.port] {
			continue
		}
		switch optionOf(w, "-j") {
		case "DNAT":
			if ips[destinationAddr(optionOf(w, "--to-destination"))] {
				rules = append(rules, w)
			} else {
				othersDNAT[at] = true
			}
		case "NETAVARK-HOSTPORT-SETMARK":
			setmarks = append(setmarks, struct {
				at   chainPort
				rule []string
			}{at, w})
		}
	}
	for _, sm := range setmarks {
		if !othersDNAT[sm.at] {
			rules = append(rules, sm.rule)
		}
	}
	return rules
}

// hostPortMatch is how a rule of mapping p names its protocol and host
// port(s): "tcp/8080", "udp/8000:8009".
func hostPortMatch(p core.PortMapping) string {
	proto := p.Protocol
	if proto == "" {
		proto = "tcp"
	}
	port := strconv.Itoa(int(p.HostPort))
	if p.Range > 1 {
		port += ":" + strconv.Itoa(int(p.HostPort)+int(p.Range)-1)
	}
	return proto + "/" + port
}

// optionOf answers the word after option name in a rule ("" without it).
func optionOf(w []string, name string) string {
	for i := 0; i+1 < len(w); i++ {
		if w[i] == name {
			return w[i+1]
		}
	}
	return ""
}

// destinationAddr is the address of a DNAT target: "10.89.0.2:80",
// "10.89.0.2:8000-8009", "[fd00::2]:80".
func destinationAddr(to string) string {
	if rest, ok := strings.CutPrefix(to, "["); ok {
		addr, _, _ := strings.Cut(rest, "]")
		return addr
	}
	addr, _, _ := strings.Cut(to, ":")
	return addr
}

// removeDNChain deletes network n's port-forwarding chain from the nat
// tables (IPv4 and IPv6), with the jumps to it: netavark deletes it with
// the network's last published port, but a teardown a kill -9 cut leaves it
// (with DNAT rules to addresses the next containers may get, or empty),
// and neither the sweep nor a network's removal reached it. Called when n
// goes, after its containers; the caller holds setupMu.
func removeDNChain(ctx context.Context, n *core.Network) error {
	return dropDNChain(ctx, n, false)
}

// removeEmptyDNChain deletes network n's port-forwarding chain where it is
// there, empty and not jumped to. netavark deletes it in the teardown of a
// network's last container, but with a keeper holding the network that
// last teardown is the keeper's, which has no ports: the chain stayed
// behind, empty, after every network whose published ports had all gone.
// The caller holds setupMu.
func removeEmptyDNChain(ctx context.Context, n *core.Network) error {
	return dropDNChain(ctx, n, true)
}

// dropDNChain deletes n's chain in each nat table that has it: with the
// jumps to it and its rules, or, onlyEmpty, where it has neither.
func dropDNChain(ctx context.Context, n *core.Network, onlyEmpty bool) error {
	chain := dnChain(n.ID)
	var errs []error
	for _, tool := range []string{"iptables", "ip6tables"} {
		listing, err := exec.CommandContext(ctx, tool, "-w", "-t", "nat", "-S").Output()
		if err != nil {
			continue
		}
		jumps, exists := chainRulesOf(string(listing), chain)
		if !exists {
			continue
		}
		var cmds [][]string
		if onlyEmpty {
			if len(jumps) > 0 || strings.Contains(string(listing), "\n-A "+chain+" ") {
				continue
			}
		} else {
			for _, rule := range jumps {
				cmds = append(cmds, append([]string{"-D"}, rule[1:]...))
			}
			cmds = append(cmds, []string{"-F", chain})
		}
		cmds = append(cmds, []string{"-X", chain})
		for _, c := range cmds {
			args := append([]string{"-w", "-t", "nat"}, c...)
			if out, err := exec.CommandContext(ctx, tool, args...).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("%s %s: %v: %s", tool, strings.Join(args, " "), err, bytes.TrimSpace(out)))
			}
		}
	}
	return errors.Join(errs...)
}

// chainRulesOf picks from a table's rules, as "iptables -S" lists them, the
// rules of other chains that jump to chain (each as its words), and
// whether chain exists.
func chainRulesOf(listing, chain string) (jumps [][]string, exists bool) {
	for _, line := range strings.Split(listing, "\n") {
		w, err := words.Split(line, words.Rules{Separators: " ", Escapes: true})
		if err != nil || len(w) < 2 {
			continue
		}
		switch {
		case w[0] == "-N" && w[1] == chain:
			exists = true
		case w[0] == "-A" && w[1] != chain && optionOf(w, "-j") == chain:
			jumps = append(jumps, w)
		}
	}
	return jumps, exists
}
