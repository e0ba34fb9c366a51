package network

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// aardvark-dns's configuration, as netavark 1.4 keeps it under its config
// directory: aardvark-dns/NETWORK holds a header line "GATEWAYS[ SERVERS]"
// (the network's gateway addresses and upstream DNS servers, each list
// comma-separated) and one line per container "ID IPV4S IPV6S NAMES[
// SERVERS]"; writers hold an exclusive flock on aardvark.lock beside the
// directory; the aardvark-dns whose pid is in aardvark-dns/aardvark.pid
// rereads the files on SIGHUP and exits when none is left.

// errAardvarkNotRunning is answered by reloadAardvark when no aardvark-dns
// of this configuration runs.
var errAardvarkNotRunning = errors.New("aardvark-dns is not running")

// dnsEntry is one container's line in a network's aardvark-dns file.
type dnsEntry struct {
	containerID string
	ips         []net.IP
	// names are the container's name, then its aliases.
	names []string
	// servers are the container's own upstream servers.
	servers []net.IP
}

// line renders the entry as netavark 1.4 writes it.
func (e dnsEntry) line() string {
	var v4, v6 []net.IP
	for _, ip := range e.ips {
		if ip4 := ip.To4(); ip4 != nil {
			v4 = append(v4, ip4)
		} else {
			v6 = append(v6, ip)
		}
	}
	line := e.containerID + " " + joinIPs(v4) + " " + joinIPs(v6) + " " + strings.Join(e.names, ",")
	if len(e.servers) > 0 {
		line += " " + joinIPs(e.servers)
	}
	return line + "\n"
}

// dnsHeader is the first line of a network's aardvark-dns file.
func dnsHeader(gateways []net.IP, servers []string) string {
	header := joinIPs(gateways)
	if len(servers) > 0 {
		header += " " + strings.Join(servers, ",")
	}
	return header + "\n"
}

func joinIPs(ips []net.IP) string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.String()
	}
	return strings.Join(out, ",")
}

// withoutEntry answers a network file's content without the lines of
// containerID (whose first field is exactly the ID), whether any went, and
// whether only the header is left.
func withoutEntry(data, containerID string) (out string, removed, headerOnly bool) {
	lines := strings.SplitAfter(data, "\n")
	var b strings.Builder
	kept := 0
	for i, line := range lines {
		if line == "" {
			continue
		}
		if i > 0 {
			if id, _, _ := strings.Cut(line, " "); strings.TrimSuffix(id, "\n") == containerID {
				removed = true
				continue
			}
		}
		b.WriteString(line)
		kept++
	}
	return b.String(), removed, kept <= 1
}

// withDNSConfigLock runs fn under the exclusive lock netavark takes while it
// commits aardvark-dns entries.
func (n *netavark) withDNSConfigLock(fn func() error) error {
	path := filepath.Join(n.configDir, "aardvark.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	return fn()
}

// addDNSEntry appends e to network's aardvark-dns file (created with
// header when missing) under the lock, and has aardvark-dns reload.
func (n *netavark) addDNSEntry(network, header string, e dnsEntry) error {
	path := filepath.Join(n.configDir, "aardvark-dns", network)
	err := n.withDNSConfigLock(func() error {
		data := e.line()
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) {
			f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		} else if err == nil {
			data = header + data
		}
		if err != nil {
			return err
		}
		// One write: aardvark-dns never reads half a line.
		_, err = f.WriteString(data)
		return errors.Join(err, f.Close())
	})
	if err != nil {
		return fmt.Errorf("add the DNS entry of %s on %s: %w", e.names[0], network, err)
	}
	return n.reloadAardvark()
}

// removeDNSEntry drops containerID's lines from network's aardvark-dns
// file under the lock (the file goes with its last entry, as netavark
// does) and has aardvark-dns reload.
func (n *netavark) removeDNSEntry(network, containerID string) error {
	path := filepath.Join(n.configDir, "aardvark-dns", network)
	removed := false
	err := n.withDNSConfigLock(func() error {
		data, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		out, gone, headerOnly := withoutEntry(string(data), containerID)
		if removed = gone; !gone {
			return nil
		}
		if headerOnly {
			return os.Remove(path)
		}
		return replaceFile(path, []byte(out))
	})
	if err != nil {
		return fmt.Errorf("remove the DNS entry of %s on %s: %w", containerID, network, err)
	}
	if !removed {
		return nil
	}
	if err := n.reloadAardvark(); err != nil && !errors.Is(err, errAardvarkNotRunning) {
		return err
	}
	return nil
}

// replaceFile writes data to path through a renamed temporary file, so a
// reader sees the old content or the new one.
func replaceFile(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// aardvarkPID answers the pid of the running aardvark-dns of this
// configuration, or 0. A pid file left by one that exited may name
// another process by now: the process must be aardvark-dns.
func (n *netavark) aardvarkPID() int {
	data, err := os.ReadFile(filepath.Join(n.configDir, "aardvark-dns", "aardvark.pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil || strings.TrimSpace(string(comm)) != "aardvark-dns" {
		return 0
	}
	return pid
}

// reloadAardvark has the running aardvark-dns reread its files.
func (n *netavark) reloadAardvark() error {
	pid := n.aardvarkPID()
	if pid == 0 {
		return errAardvarkNotRunning
	}
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return errAardvarkNotRunning
		}
		return fmt.Errorf("reload aardvark-dns: %w", err)
	}
	return nil
}
