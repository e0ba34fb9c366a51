package network

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"github.com/berth-project/berth/engine/internal/core"
)

// netavarkCandidates are where Debian and Fedora install netavark.
var netavarkCandidates = []string{"/usr/lib/podman/netavark", "/usr/libexec/podman/netavark", "/usr/local/libexec/podman/netavark"}

// findHelper returns the first existing path of name's candidates, else
// name looked up in PATH, else "".
func findHelper(name string, candidates []string) string {
	for _, c := range candidates {
		if _, err := os.Stat(c); err == nil {
			return c
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return ""
}

// netavarkNetwork is a network as netavark reads it.
type netavarkNetwork struct {
	Name              string            `json:"name"`
	ID                string            `json:"id"`
	Driver            string            `json:"driver"`
	NetworkInterface  string            `json:"network_interface,omitempty"`
	Subnets           []core.Subnet     `json:"subnets,omitempty"`
	IPv6Enabled       bool              `json:"ipv6_enabled"`
	Internal          bool              `json:"internal"`
	DNSEnabled        bool              `json:"dns_enabled"`
	NetworkDNSServers []string          `json:"network_dns_servers,omitempty"`
	Options           map[string]string `json:"options,omitempty"`
	IPAMOptions       map[string]string `json:"ipam_options,omitempty"`
}

// netavarkPerNetwork is how a container joins one network, for netavark.
type netavarkPerNetwork struct {
	StaticIPs     []string `json:"static_ips,omitempty"`
	Aliases       []string `json:"aliases,omitempty"`
	StaticMAC     string   `json:"static_mac,omitempty"`
	InterfaceName string   `json:"interface_name"`
}

// netavarkOptions is netavark's setup and teardown input.
type netavarkOptions struct {
	ContainerID   string                        `json:"container_id"`
	ContainerName string                        `json:"container_name"`
	Networks      map[string]netavarkPerNetwork `json:"networks"`
	NetworkInfo   map[string]netavarkNetwork    `json:"network_info"`
	PortMappings  []core.PortMapping            `json:"port_mappings,omitempty"`
	DNSServers    []string                      `json:"dns_servers,omitempty"`
}

// netavark runs the netavark binary with the engine's configuration
// directory (aardvark-dns keeps its files under it).
type netavark struct {
	binary    string
	aardvark  string
	configDir string
	versionState
}

// run executes one netavark command with opts on stdin and decodes its
// JSON answer into out (when out is not nil).
func (n *netavark) run(ctx context.Context, command, netns string, opts netavarkOptions, out any) error {
	input, err := json.Marshal(opts)
	if err != nil {
		return err
	}
	args := []string{"--config", n.configDir}
	if n.aardvark != "" {
		args = append(args, "--aardvark-binary", n.aardvark)
	}
	args = append(args, command, netns)
	cmd := exec.CommandContext(ctx, n.binary, args...)
	cmd.Stdin = bytes.NewReader(input)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	// netavark looks for iptables and ip in PATH.
	cmd.Env = append(os.Environ(), "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	// netavark dies with the engine: one left running by a killed engine
	// could finish a setup after the restarted engine has torn it down (and
	// start an aardvark-dns nobody stops). The signal follows the thread
	// that forked it, so this goroutine keeps that thread until netavark
	// is done: no other goroutine can lock it and make it exit.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Run(); err != nil {
		var answer struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(stdout.Bytes(), &answer) == nil && answer.Error != "" {
			return fmt.Errorf("netavark %s: %s", command, answer.Error)
		}
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("netavark %s: %s", command, msg)
	}
	if out != nil {
		if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
			return fmt.Errorf("netavark %s: decode answer %q: %w", command, stdout.String(), err)
		}
	}
	return nil
}

// updateDNSServers rewrites the upstream servers of a network in
// aardvark-dns's configuration (the second column of the file's first line,
// as netavark writes it) under netavark's lock and asks a running
// aardvark-dns to reload.
func (n *netavark) updateDNSServers(network string, servers []string) error {
	file := filepath.Join(n.configDir, "aardvark-dns", network)
	missing := false
	err := n.withDNSConfigLock(func() error {
		data, err := os.ReadFile(file)
		if errors.Is(err, os.ErrNotExist) {
			// No container runs on the network: the next setup passes them.
			missing = true
			return nil
		}
		if err != nil {
			return err
		}
		lines := strings.SplitAfterN(string(data), "\n", 2)
		bind, _, _ := strings.Cut(strings.TrimSuffix(lines[0], "\n"), " ")
		first := bind
		if len(servers) > 0 {
			first += " " + strings.Join(servers, ",")
		}
		rest := ""
		if len(lines) > 1 {
			rest = lines[1]
		}
		return replaceFile(file, []byte(first+"\n"+rest))
	})
	if err != nil || missing {
		return err
	}
	if err := n.reloadAardvark(); err != nil && !errors.Is(err, errAardvarkNotRunning) {
		return err
	}
	return nil
}
