package oci

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/berth-project/berth/engine/internal/core"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Files are the host files and directories the engine made for a
// container that Mounts binds into it.
type Files struct {
	Hosts, ResolvConf, Hostname string
	// Shm is the host directory bound at /dev/shm ("": a tmpfs of the
	// container's own).
	Shm string
}

// HostGateway is the address of --add-host NAME:host-gateway.
const HostGateway = "host-gateway"

// DefaultShmSize is the size of /dev/shm when the request does not set one:
// Podman's default of 65536k read as decimal kilobytes.
const DefaultShmSize = 65536000

// Mounts returns the container's mounts: the kernel filesystems every
// container gets, the generated /etc files, then the request's bind and
// tmpfs mounts, which override defaults at the same destination.
// With userNS, /sys is the host's, bound read-only: sysfs can only be
// mounted fresh by the user namespace that owns the network namespace,
// which a bridged container's (made by the engine) is not.
//
// files.Shm, where set, is a host directory (a tmpfs the engine mounted:
// the container's own shareable /dev/shm, or the one of the container or
// pod infra whose IPC namespace it joins) bound at /dev/shm in place of a
// tmpfs of the container's own.
func Mounts(s *core.ContainerSpec, made Files, userNS bool) ([]specs.Mount, error) {
	hostsFile, resolvFile, hostnameFile := made.Hosts, made.ResolvConf, made.Hostname
	shm := int64(DefaultShmSize)
	if s.ShmSize != nil {
		if *s.ShmSize <= 0 {
			return nil, core.InvalidArgument("shm_size", fmt.Errorf("%d must be positive", *s.ShmSize))
		}
		shm = *s.ShmSize
	}
	sysOpts := []string{"nosuid", "noexec", "nodev", "ro"}
	if s.Privileged {
		sysOpts = []string{"nosuid", "noexec", "nodev", "rw"}
	}
	base := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", fmt.Sprintf("size=%d", shm)}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: sysOpts},
		{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
	}
	if s.ReadOnly && s.ReadWriteTmpfs != nil && !*s.ReadWriteTmpfs {
		// --read-only --read-only-tmpfs=false: /dev is read-only as well.
		base[1].Options = append(slices.Clone(base[1].Options), "ro")
	}
	if s.NetNS.NSMode == core.NetNSHost || userNS {
		// sysfs cannot be mounted fresh without a network namespace of our own.
		base = replaceMount(base, specs.Mount{Destination: "/sys", Type: "bind", Source: "/sys", Options: []string{"rbind", "nosuid", "noexec", "nodev", "ro"}})
	}
	switch s.IpcNS.NSMode {
	case core.NSHost:
		// The host's shared memory; the mqueue file system mounted in the
		// host's IPC namespace shows the host's message queues (a bind of
		// the host's /dev/mqueue where it has one mounted).
		base = replaceMount(base, specs.Mount{Destination: "/dev/shm", Type: "bind", Source: "/dev/shm", Options: []string{"rbind", "nosuid", "noexec", "nodev"}})
		if fi, err := os.Stat("/dev/mqueue"); err == nil && fi.IsDir() {
			base = replaceMount(base, specs.Mount{Destination: "/dev/mqueue", Type: "bind", Source: "/dev/mqueue", Options: []string{"rbind", "nosuid", "noexec", "nodev"}})
		} else if userNS {
			// A user namespace may not mount the host IPC namespace's
			// mqueue: the queues stay reachable through mq_open alone.
			base = slices.DeleteFunc(base, func(m specs.Mount) bool { return m.Destination == "/dev/mqueue" })
		}
	case core.IPCNSNone:
		base = slices.DeleteFunc(base, func(m specs.Mount) bool { return m.Destination == "/dev/shm" })
	default:
		if made.Shm != "" {
			base = replaceMount(base, specs.Mount{Destination: "/dev/shm", Type: "bind", Source: made.Shm, Options: []string{"rbind", "nosuid", "noexec", "nodev"}})
		}
	}
	files := []specs.Mount{
		{Destination: "/etc/hosts", Type: "bind", Source: hostsFile, Options: []string{"bind", "rprivate"}},
		{Destination: "/etc/resolv.conf", Type: "bind", Source: resolvFile, Options: []string{"bind", "rprivate"}},
		{Destination: "/etc/hostname", Type: "bind", Source: hostnameFile, Options: []string{"bind", "rprivate"}},
	}
	user := make([]specs.Mount, 0, len(s.Mounts))
	seen := map[string]bool{}
	for i, m := range s.Mounts {
		field := fmt.Sprintf("mounts[%d]", i)
		um, err := userMount(field, m)
		if err != nil {
			return nil, err
		}
		if seen[um.Destination] {
			return nil, core.InvalidArgument(field+".destination", fmt.Errorf("duplicate mount destination %s", um.Destination))
		}
		seen[um.Destination] = true
		user = append(user, um)
	}
	files = slices.DeleteFunc(files, func(m specs.Mount) bool {
		return s.UseImageHosts && m.Destination == "/etc/hosts" || s.UseImageResolvConf && m.Destination == "/etc/resolv.conf"
	})
	var out []specs.Mount
	for _, m := range append(base, files...) {
		if !seen[m.Destination] {
			out = append(out, m)
		}
	}
	// Parents before children, so /data is mounted before /data/sub.
	sort.SliceStable(user, func(i, j int) bool {
		return strings.Count(user[i].Destination, "/") < strings.Count(user[j].Destination, "/")
	})
	return append(out, user...), nil
}

func userMount(field string, m specs.Mount) (specs.Mount, error) {
	if m.Destination == "" || !filepath.IsAbs(m.Destination) {
		return m, core.InvalidArgument(field+".destination", fmt.Errorf("%q must be an absolute path", m.Destination))
	}
	m.Destination = filepath.Clean(m.Destination)
	if m.Destination == "/" {
		return m, core.InvalidArgument(field+".destination", errors.New("cannot mount over /"))
	}
	opts := make([]string, 0, len(m.Options)+3)
	switch m.Type {
	case "bind", "":
		if !filepath.IsAbs(m.Source) {
			return m, core.InvalidArgument(field+".source", fmt.Errorf("%q must be an absolute host path", m.Source))
		}
		if _, err := os.Stat(m.Source); err != nil {
			return m, core.InvalidArgument(field+".source", fmt.Errorf("%s: %w", m.Source, errors.Unwrap(err)))
		}
		m.Type = "bind"
		recursive := true
		for _, o := range m.Options {
			switch o {
			case "ro", "rw", "nosuid", "suid", "nodev", "dev", "noexec", "exec",
				"private", "rprivate", "shared", "rshared", "slave", "rslave", "unbindable", "runbindable",
				"z", "Z", "U", "O":
			case "bind":
				recursive = false
			case "rbind":
				recursive = true
			default:
				return m, core.InvalidArgument(field+".options", fmt.Errorf("unknown bind mount option %q", o))
			}
			if o != "z" && o != "Z" && o != "U" && o != "O" && o != "bind" && o != "rbind" {
				opts = append(opts, o)
			}
		}
		if recursive {
			opts = append(opts, "rbind")
		} else {
			opts = append(opts, "bind")
		}
	case "tmpfs":
		m.Source = "tmpfs"
		to, err := TmpfsOptions(m.Options)
		if err != nil {
			return m, core.InvalidArgument(field+".options", err)
		}
		opts = append(opts, to...)
	case "devpts":
		// A devpts of the container's own (podman's --mount type=devpts):
		// always a new instance, never the host's terminals.
		m.Source = "devpts"
		opts = append(opts, "newinstance", "nosuid", "noexec")
		for _, o := range m.Options {
			key, val, hasVal := strings.Cut(o, "=")
			switch {
			case o == "newinstance" || o == "nosuid" || o == "noexec":
			case hasVal && (key == "uid" || key == "gid" || key == "max"):
				if _, err := strconv.ParseUint(val, 10, 32); err != nil {
					return m, core.InvalidArgument(field+".options", fmt.Errorf("devpts option %q needs a number", o))
				}
				opts = append(opts, o)
			case hasVal && (key == "mode" || key == "ptmxmode"):
				if _, err := strconv.ParseUint(val, 8, 32); err != nil {
					return m, core.InvalidArgument(field+".options", fmt.Errorf("devpts option %q needs an octal mode", o))
				}
				opts = append(opts, o)
			default:
				return m, core.InvalidArgument(field+".options", fmt.Errorf("unknown devpts mount option %q (uid, gid, mode, ptmxmode, max)", o))
			}
		}
	default:
		return m, core.InvalidArgument(field+".type", fmt.Errorf("mount type %q is not supported (bind, tmpfs, devpts)", m.Type))
	}
	m.Options = opts
	return m, nil
}

// tmpfsOwned returns mounts with the U option of each tmpfs (podman run
// --tmpfs /t:U) replaced by uid= and gid= of the container's user, as
// Podman does, so that user owns the tmpfs. The request is left as it is.
func tmpfsOwned(mounts []specs.Mount, uid, gid uint32) []specs.Mount {
	var out []specs.Mount
	for i, m := range mounts {
		if m.Type != "tmpfs" || !slices.Contains(m.Options, "U") {
			continue
		}
		if out == nil {
			out = slices.Clone(mounts)
		}
		opts := slices.DeleteFunc(slices.Clone(m.Options), func(o string) bool { return o == "U" })
		out[i].Options = append(opts, fmt.Sprintf("uid=%d", uid), fmt.Sprintf("gid=%d", gid))
	}
	if out == nil {
		return mounts
	}
	return out
}

// TmpfsOptions checks a tmpfs mount's options and completes them as Podman
// does: the request's options, then rw, rprivate, nosuid, nodev and
// tmpcopyup (runc copies the image's content at the destination into the
// tmpfs) unless the request chose otherwise; notmpcopyup only turns that off.
func TmpfsOptions(options []string) ([]string, error) {
	var write, prop, suid, dev, copyUp bool
	out := make([]string, 0, len(options)+5)
	for _, o := range options {
		k, _, hasValue := strings.Cut(o, "=")
		switch k {
		case "size", "mode", "uid", "gid", "nr_inodes":
		case "ro", "rw":
			write = true
		case "private", "rprivate", "shared", "rshared", "slave", "rslave", "unbindable", "runbindable":
			prop = true
		case "nosuid", "suid":
			suid = true
		case "nodev", "dev":
			dev = true
		case "noexec", "exec", "noatime", "relatime", "strictatime":
		case "tmpcopyup", "notmpcopyup":
			copyUp = true
		default:
			return nil, fmt.Errorf("unknown tmpfs option %q", o)
		}
		switch k {
		case "size", "mode", "uid", "gid", "nr_inodes":
			if !hasValue {
				return nil, fmt.Errorf("tmpfs option %q needs a value", o)
			}
		default:
			if hasValue {
				return nil, fmt.Errorf("tmpfs option %q takes no value", o)
			}
		}
		if k != "notmpcopyup" {
			out = append(out, o)
		}
	}
	if !write {
		out = append(out, "rw")
	}
	if !prop {
		out = append(out, "rprivate")
	}
	if !suid {
		out = append(out, "nosuid")
	}
	if !dev {
		out = append(out, "nodev")
	}
	if !copyUp {
		out = append(out, "tmpcopyup")
	}
	return out, nil
}

// HostsFile returns the content of a container's /etc/hosts.
//
// An address "host-gateway" (Docker's, and Podman 5's) stands for the host
// as the container reaches it: hostGateway, the gateway of its network (or
// 127.0.0.1 in the host's network namespace); while that is not known ("")
// the entry waits for the file written after the network's setup.
func HostsFile(s *core.ContainerSpec, hostname, name, hostGateway string) (string, error) {
	var b strings.Builder
	b.WriteString("127.0.0.1\tlocalhost localhost.localdomain localhost4 localhost4.localdomain4\n")
	b.WriteString("::1\tlocalhost localhost.localdomain localhost6 localhost6.localdomain6\n")
	if s.NetNS.NSMode == core.NetNSHost {
		hostGateway = "127.0.0.1"
	}
	for i, h := range s.HostAdd {
		host, ip, ok := strings.Cut(h, ":")
		if !ok || host == "" || ip == "" {
			return "", core.InvalidArgument(fmt.Sprintf("hostadd[%d]", i), fmt.Errorf("%q is not host:ip", h))
		}
		if ip == HostGateway {
			if hostGateway == "" {
				continue
			}
			ip = hostGateway
		} else if net.ParseIP(strings.Trim(ip, "[]")) == nil {
			return "", core.InvalidArgument(fmt.Sprintf("hostadd[%d]", i), fmt.Errorf("%q: %q is not an IP address or host-gateway", h, ip))
		}
		fmt.Fprintf(&b, "%s\t%s\n", strings.Trim(ip, "[]"), host)
	}
	names := hostname
	if name != "" && name != hostname {
		names += " " + name
	}
	if s.Domainname != "" {
		names = hostname + "." + s.Domainname + " " + names
	}
	fmt.Fprintf(&b, "127.0.1.1\t%s\n", names)
	return b.String(), nil
}

// NetworkResolvConf is ResolvConf for a container on networks: the name
// servers netavark answered (aardvark-dns on networks with DNS), which
// forward to the request's or the host's servers, replace them, and the
// networks' search domains come first.
func NetworkResolvConf(s *core.ContainerSpec, hostResolv []byte, dnsServers, searchDomains []string) string {
	if len(dnsServers) == 0 {
		return ResolvConf(s, hostResolv)
	}
	withDNS := *s
	withDNS.DNSServers = dnsServers
	base := ResolvConf(&withDNS, hostResolv)
	if len(searchDomains) == 0 {
		return base
	}
	var search []string
	var rest strings.Builder
	for _, line := range strings.SplitAfter(base, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "search" {
			search = f[1:]
			continue
		}
		rest.WriteString(line)
	}
	return "search " + strings.Join(append(append([]string(nil), searchDomains...), search...), " ") + "\n" + rest.String()
}

// ResolvConf returns the content of a container's /etc/resolv.conf: the
// request's servers, searches and options, else the host's file, without
// loopback name servers unless the container shares the host's network.
func ResolvConf(s *core.ContainerSpec, hostResolv []byte) string {
	var servers, search, options []string
	for _, line := range strings.Split(string(hostResolv), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "nameserver":
			if s.NetNS.NSMode != core.NetNSHost && (strings.HasPrefix(f[1], "127.") || f[1] == "::1") {
				continue
			}
			servers = append(servers, f[1])
		case "search":
			search = f[1:]
		case "options":
			options = append(options, f[1:]...)
		}
	}
	if len(s.DNSServers) > 0 {
		servers = s.DNSServers
	}
	if len(s.DNSSearch) > 0 {
		search = s.DNSSearch
	}
	if len(s.DNSOptions) > 0 {
		options = s.DNSOptions
	}
	var b strings.Builder
	if len(search) > 0 && !(len(search) == 1 && search[0] == ".") {
		b.WriteString("search " + strings.Join(search, " ") + "\n")
	}
	for _, ns := range servers {
		b.WriteString("nameserver " + ns + "\n")
	}
	if len(options) > 0 {
		b.WriteString("options " + strings.Join(options, " ") + "\n")
	}
	return b.String()
}

// replaceMount puts m in place of the mount of mounts at m's destination.
func replaceMount(mounts []specs.Mount, m specs.Mount) []specs.Mount {
	for i := range mounts {
		if mounts[i].Destination == m.Destination {
			mounts[i] = m
		}
	}
	return mounts
}
