// Package oci turns a container creation request and its image configuration
// into an OCI runtime spec (config.json) for runc, and generates the files a
// container gets bind-mounted (/etc/hosts, /etc/resolv.conf, /etc/hostname).
package oci

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/berth-project/berth/engine/internal/backend/execution/cgroups"
	"github.com/berth-project/berth/engine/internal/backend/execution/seccomp"
	"github.com/berth-project/berth/engine/internal/core"
	securejoin "github.com/cyphar/filepath-securejoin"
	"github.com/moby/sys/user"
	imgspec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// KeepGroupsAnnotation asks crun to keep the supplementary groups of its
// caller for the container's process (podman --group-add keep-groups).
const KeepGroupsAnnotation = "run.oci.keep_original_groups"

// DefaultPath is the PATH a container gets when neither image nor request sets one.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// DefaultCapabilities are the capabilities of an unprivileged container, the
// same set Podman grants by default.
var defaultCapabilities = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
	"CAP_NET_BIND_SERVICE", "CAP_SETFCAP", "CAP_SETGID", "CAP_SETPCAP", "CAP_SETUID", "CAP_SYS_CHROOT",
}

// Podman's keys for settings it records among a container's OCI
// annotations; clients read them back from inspect's Config.Annotations.
const (
	AnnotationPrivileged = "io.podman.annotations.privileged"
	AnnotationAutoremove = "io.podman.annotations.autoremove"
	AnnotationInit       = "io.podman.annotations.init"
)

// annotationTrue is Podman's value of a set boolean annotation.
const annotationTrue = "TRUE"

// Annotations are a container's annotations as Podman 5 writes them into
// its OCI configuration: the requested ones, and "TRUE" under Podman's key
// for a privileged, auto-removed or init container (Podman 5 writes no
// "FALSE" ones).
func Annotations(s *core.ContainerSpec) map[string]string {
	out := make(map[string]string, len(s.Annotations)+3)
	for k, v := range s.Annotations {
		out[k] = v
	}
	for key, set := range map[string]bool{AnnotationPrivileged: s.Privileged, AnnotationAutoremove: s.Remove, AnnotationInit: s.Init} {
		if set {
			out[key] = annotationTrue
		}
	}
	return out
}

// DefaultCapabilities returns a copy of the default capability set.
func DefaultCapabilities() []string { return append([]string(nil), defaultCapabilities...) }

// maskedPaths and readonlyPaths are the kernel files Podman hides from an
// unprivileged container (bind-mounting /dev/null or an empty tmpfs over
// them) or makes read-only: they leak host information or change the host.
var maskedPaths = []string{
	"/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
	"/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware", "/sys/fs/selinux", "/sys/dev/block",
	"/sys/devices/virtual/powercap",
}

var readonlyPaths = []string{
	"/proc/asound", "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
}

// Input is everything Generate needs for one container.
type Input struct {
	ID   string
	Spec *core.ContainerSpec
	// Image is the image's configuration (entrypoint, cmd, env, user, workdir).
	Image imgspec.ImageConfig
	// Rootfs is the mounted root filesystem.
	Rootfs string
	// HostsFile, ResolvConfFile and HostnameFile are bind-mounted into the container.
	HostsFile, ResolvConfFile, HostnameFile string
	// ShmDir is the host directory bound at /dev/shm (Files.Shm).
	ShmDir string
	// CgroupsPath is the cgroupfs path of the container ("/berth/berth-ID").
	CgroupsPath string
	// NetNSPath is the network namespace of a bridged container, set up
	// by the network backend before the runtime creates the container.
	NetNSPath string
	// Host carries the engine's own limits and capabilities.
	Host Host
	// JoinNamespaces are namespaces to join instead of creating them, by
	// path (a pod member joins its infra container's /proc/PID/ns/...).
	JoinNamespaces map[specs.LinuxNamespaceType]string
	// UIDMappings and GIDMappings give the container a user namespace of
	// its own with these mappings (none: the host's).
	UIDMappings, GIDMappings []specs.LinuxIDMapping
	// ApparmorProfile is the AppArmor profile the process runs under
	// ("": none), chosen by the caller against the host's AppArmor.
	ApparmorProfile string
	// SeccompProfile is the text of the container's own seccomp profile,
	// read and checked at create; nil means the engine's default profile
	// (unless the spec asks for none).
	SeccompProfile []byte
}

// Result is a generated spec plus what the caller reports back to the client.
type Result struct {
	Spec     *specs.Spec
	Warnings []string
}

// SpecVersion is the ociVersion the engine's specs carry: the version Debian
// 12's runtimes speak, "1.0.2-dev" (what its runc 1.1.5 reports, and what
// Podman 4.3.1 writes). runc reads no version; crun up to 1.8.1 (Debian
// 12's) refuses every spec whose ociVersion lacks "1.0" ("unknown version
// specified"), so the runtime-spec module's own (1.3.0) would shut crun out
// of Debian 12 hosts; crun 1.21 (Debian 13's) checks none. The runtimes
// read the fields by name, whatever the version says.
const SpecVersion = "1.0.2-dev"

// Generate builds the OCI spec. Errors about the request wrap core.ErrInvalidArgument
// with the field named.
func Generate(in Input) (*Result, error) {
	s := in.Spec
	res := &Result{}
	args, err := ProcessArgs(s, in.Image)
	if err != nil {
		return nil, err
	}
	hostname := s.Hostname
	if hostname == "" {
		hostname = in.ID[:12]
	}
	proc := &specs.Process{
		Terminal:        s.Terminal,
		Args:            args,
		Cwd:             s.WorkDir,
		NoNewPrivileges: s.NoNewPrivs,
		OOMScoreAdj:     s.OOMScoreAdj,
	}
	if proc.Cwd == "" {
		proc.Cwd = in.Image.WorkingDir
	}
	if proc.Cwd == "" {
		proc.Cwd = "/"
	}
	if !filepath.IsAbs(proc.Cwd) {
		return nil, core.InvalidArgument("work_dir", fmt.Errorf("%q is not an absolute path", proc.Cwd))
	}
	if err := ensureDir(in.Rootfs, proc.Cwd); err != nil {
		return nil, fmt.Errorf("create working directory %s: %w", proc.Cwd, err)
	}

	userSpec := s.User
	if userSpec == "" {
		userSpec = in.Image.User
	}
	groups := s.Groups
	keepGroups := slices.Contains(groups, core.KeepGroups)
	if keepGroups {
		// Not a group: the runtime keeps the caller's groups (below).
		groups = nil
	}
	execUser, err := ResolveUser(in.Rootfs, userSpec, nil)
	if err != nil {
		return nil, err
	}
	extra, err := GroupIDs(in.Rootfs, groups)
	if err != nil {
		return nil, err
	}
	proc.User = specs.User{UID: uint32(execUser.Uid), GID: uint32(execUser.Gid)}
	// As Podman: a container with a user (the request's or the image's)
	// holds its primary group and the groups /etc/group lists it in as
	// supplementary groups too (runc sets exactly these); one without
	// holds only the requested ones. dockerd's hold them always.
	var gids []uint32
	if userSpec != "" || s.DockerGroups {
		gids = append([]uint32{uint32(execUser.Gid)}, MemberGroups(userSpec, execUser)...)
	}
	proc.User.AdditionalGids = AppendNew(gids, extra...)
	if s.Umask != "" {
		v, err := strconv.ParseUint(s.Umask, 8, 32)
		if err != nil {
			return nil, core.InvalidArgument("umask", fmt.Errorf("%q is not an octal number", s.Umask))
		}
		u := uint32(v)
		proc.User.Umask = &u
	}
	home := execUser.Home
	if home == "" {
		home = "/"
	}
	proc.Env = MergeEnv(in.Image.Env, s, hostname, home)

	caps, err := Capabilities(s, in.Host)
	if err != nil {
		return nil, err
	}
	proc.Capabilities = &specs.LinuxCapabilities{Bounding: caps, Effective: caps, Permitted: caps}
	if execUser.Uid == 0 {
		proc.Capabilities.Inheritable = nil
	} else {
		// A non-root process keeps no effective capabilities, as with Podman.
		proc.Capabilities.Effective = nil
		proc.Capabilities.Permitted = nil
	}

	rl, warns, err := Rlimits(s.Rlimits, in.Host)
	if err != nil {
		return nil, err
	}
	res.Warnings = append(res.Warnings, warns...)
	proc.Rlimits = rl

	spec := &specs.Spec{
		Version:     SpecVersion,
		Process:     proc,
		Root:        &specs.Root{Path: in.Rootfs, Readonly: s.ReadOnly},
		Hostname:    hostname,
		Domainname:  s.Domainname,
		Annotations: map[string]string{},
		Linux: &specs.Linux{
			CgroupsPath: in.CgroupsPath,
			Sysctl:      s.Sysctl,
			Resources:   &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}}},
		},
	}
	_, joinsNet := in.JoinNamespaces[specs.NetworkNamespace]
	// A user namespace's root can write the sysctls of a network namespace
	// only where that namespace belongs to it: runc creates it beside the
	// user namespace, but one the engine prepared (a bridge) or an infra
	// container's belongs to another.
	foreignNet := len(in.UIDMappings) > 0 && (in.NetNSPath != "" || joinsNet)
	if s.NetNS.NSMode != core.NetNSHost && s.NetNS.NSMode != core.NetNSContainer && s.NetNS.NSMode != core.NetNSPath && !foreignNet {
		// Like Podman: ping works without CAP_NET_RAW in the container's
		// own network namespace.
		if _, set := s.Sysctl[PingGroupRange]; !set {
			sysctl := map[string]string{PingGroupRange: DefaultPingGroupRange}
			for k, v := range s.Sysctl {
				sysctl[k] = v
			}
			spec.Linux.Sysctl = sysctl
		}
	}
	for k, v := range Annotations(s) {
		spec.Annotations[k] = v
	}
	if keepGroups {
		// crun's way (Podman's too): the process keeps the supplementary
		// groups of the runtime's caller. runc has none; the container
		// backend refuses keep-groups there.
		spec.Annotations[KeepGroupsAnnotation] = "1"
	}
	if !s.Privileged {
		spec.Linux.MaskedPaths, spec.Linux.ReadonlyPaths = kernelPaths(s.Mask, s.Unmask)
	} else {
		spec.Linux.MaskedPaths = append([]string(nil), s.Mask...)
		spec.Linux.Resources.Devices = []specs.LinuxDeviceCgroup{{Allow: true, Access: "rwm"}}
	}
	proc.ApparmorProfile = in.ApparmorProfile
	if err := applySeccomp(spec, s, in); err != nil {
		return nil, err
	}

	nsSpec := s
	if s.NetNS.NSMode == core.NetNSBridge && in.NetNSPath == "" && len(in.UIDMappings) > 0 {
		// A bridged container with a user namespace of its own: runc
		// creates the network namespace inside the user namespace and the
		// container backend sets the bridge up in it after the create.
		c := *s
		c.NetNS = core.Namespace{NSMode: core.NetNSPrivate}
		nsSpec = &c
	}
	ns, err := namespaces(nsSpec, in.NetNSPath)
	if err != nil {
		return nil, err
	}
	if len(in.UIDMappings) > 0 {
		// runc creates the user namespace first, so the namespaces it
		// creates beside it belong to it.
		ns = append([]specs.LinuxNamespace{{Type: specs.UserNamespace}}, ns...)
		spec.Linux.UIDMappings = in.UIDMappings
		spec.Linux.GIDMappings = in.GIDMappings
	}
	spec.Linux.Namespaces = joinNamespaces(ns, in.JoinNamespaces)
	if _, ok := in.JoinNamespaces[specs.UTSNamespace]; ok || s.UtsNS.NSMode == core.NSHost || s.UtsNS.NSMode == core.NSPath {
		// The hostname belongs to the joined UTS namespace; runc may only
		// set one in a namespace of its own.
		spec.Hostname = ""
		spec.Domainname = ""
	} else if s.Domainname != "" {
		// runc 1.1 does not apply the spec's domainname; the UTS
		// namespace's sysctl sets it with every runtime.
		sysctl := maps.Clone(spec.Linux.Sysctl)
		if sysctl == nil {
			sysctl = map[string]string{}
		}
		sysctl["kernel.domainname"] = s.Domainname
		spec.Linux.Sysctl = sysctl
	}

	if err := resources(spec.Linux.Resources, s, in.Host, &res.Warnings); err != nil {
		return nil, err
	}
	if err := addDevices(spec, s); err != nil {
		return nil, err
	}

	owned := *s
	owned.Mounts = tmpfsOwned(s.Mounts, proc.User.UID, proc.User.GID)
	mounts, err := Mounts(&owned, Files{Hosts: in.HostsFile, ResolvConf: in.ResolvConfFile, Hostname: in.HostnameFile, Shm: in.ShmDir}, len(in.UIDMappings) > 0)
	if err != nil {
		return nil, err
	}
	spec.Mounts = mounts
	res.Spec = spec
	return res, nil
}

// ProcessArgs resolves the command line from the request and the image, the
// way Docker and Podman do: an explicit entrypoint replaces the image's
// entrypoint and drops the image's cmd; an explicit command replaces the cmd.
func ProcessArgs(s *core.ContainerSpec, img imgspec.ImageConfig) ([]string, error) {
	entrypoint := img.Entrypoint
	cmd := img.Cmd
	if s.Entrypoint != nil {
		entrypoint = s.Entrypoint
		cmd = nil
	}
	if len(s.Command) > 0 {
		cmd = s.Command
	}
	args := append(append([]string(nil), entrypoint...), cmd...)
	if len(args) == 0 || args[0] == "" {
		return nil, core.InvalidArgument("command", errors.New("no command or entrypoint provided, and no CMD or ENTRYPOINT from image"))
	}
	return args, nil
}

// MergeEnv builds a container's environment: the image's variables, then
// EnvMerge's (expanded against the defaults: the image's variables with
// the engine's), then the request's env (it wins), then those defaults
// where still missing, and HOSTNAME and HOME (each unless empty).
// UnsetEnv's names are left out of the defaults, and with UnsetEnvAll every
// default is. The engine's defaults are Podman's (containers.conf's PATH
// and TERM=xterm, and container=podman) or, for a container of the Docker
// API, dockerd's (PATH, and TERM=xterm with a terminal).
func MergeEnv(imageEnv []string, s *core.ContainerSpec, hostname, home string) []string {
	vals := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	defaults := map[string]string{}
	var late []string // defaults the image does not set, in this order
	if !s.UnsetEnvAll {
		for _, kv := range imageEnv {
			k, v, _ := strings.Cut(kv, "=")
			defaults[k] = v
			if !slices.Contains(s.UnsetEnv, k) {
				set(k, v)
			}
		}
		engine := [][2]string{{"PATH", DefaultPath}}
		if !s.DockerEnv || s.Terminal {
			engine = append(engine, [2]string{"TERM", "xterm"})
		}
		if !s.DockerEnv {
			engine = append(engine, [2]string{"container", "podman"})
		}
		for _, kv := range engine {
			if _, ok := defaults[kv[0]]; !ok {
				defaults[kv[0]] = kv[1]
				late = append(late, kv[0])
			}
		}
	}
	for _, k := range s.UnsetEnv {
		delete(defaults, k)
	}
	for _, kv := range s.EnvMerge {
		k, v, _ := strings.Cut(kv, "=")
		set(k, os.Expand(v, func(name string) string { return defaults[name] }))
	}
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		set(k, s.Env[k])
	}
	for _, k := range late {
		if v, ok := defaults[k]; ok {
			if _, set0 := vals[k]; !set0 {
				set(k, v)
			}
		}
	}
	if _, ok := vals["HOSTNAME"]; !ok && hostname != "" {
		set("HOSTNAME", hostname)
	}
	if _, ok := vals["HOME"]; !ok && home != "" {
		set("HOME", home)
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vals[k])
	}
	return out
}

// ResolveUser resolves "user[:group]" (names or numbers) against the
// container's /etc/passwd and /etc/group, read without following links out
// of the rootfs. Extra groups are names or numbers.
func ResolveUser(rootfs, userSpec string, groups []string) (*user.ExecUser, error) {
	passwd, err := securejoin.SecureJoin(rootfs, "/etc/passwd")
	if err != nil {
		return nil, err
	}
	group, err := securejoin.SecureJoin(rootfs, "/etc/group")
	if err != nil {
		return nil, err
	}
	def := &user.ExecUser{Uid: 0, Gid: 0, Home: "/"}
	eu, err := user.GetExecUserPath(userSpec, def, passwd, group)
	if err != nil {
		return nil, core.InvalidArgument("user", fmt.Errorf("%q: %w", userSpec, err))
	}
	extra, err := GroupIDs(rootfs, groups)
	if err != nil {
		return nil, err
	}
	for _, g := range extra {
		eu.Sgids = append(eu.Sgids, int(g))
	}
	return eu, nil
}

// GroupIDs resolves extra groups (names or numbers) against the
// container's /etc/group, as ResolveUser does.
func GroupIDs(rootfs string, groups []string) ([]uint32, error) {
	if len(groups) == 0 {
		return nil, nil
	}
	path, err := securejoin.SecureJoin(rootfs, "/etc/group")
	if err != nil {
		return nil, err
	}
	ids, err := user.GetAdditionalGroupsPath(groups, path)
	if err != nil {
		return nil, core.InvalidArgument("groups", err)
	}
	out := make([]uint32, 0, len(ids))
	for _, g := range ids {
		out = append(out, uint32(g))
	}
	return out, nil
}

// MemberGroups are the groups the container's /etc/group lists a resolved
// user in, as Podman adds them to its processes: none where the user names
// its group ("user:group").
func MemberGroups(userSpec string, eu *user.ExecUser) []uint32 {
	if strings.Contains(userSpec, ":") {
		return nil
	}
	out := make([]uint32, 0, len(eu.Sgids))
	for _, g := range eu.Sgids {
		out = append(out, uint32(g))
	}
	return out
}

// AppendNew appends the ids list lacks, in order.
func AppendNew(list []uint32, ids ...uint32) []uint32 {
	for _, id := range ids {
		if !slices.Contains(list, id) {
			list = append(list, id)
		}
	}
	return list
}

func ensureDir(rootfs, dir string) error {
	p, err := securejoin.SecureJoin(rootfs, dir)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(p); err == nil {
		if !fi.IsDir() {
			return core.InvalidArgument("work_dir", fmt.Errorf("%s is not a directory in the image", dir))
		}
		return nil
	}
	return os.MkdirAll(p, 0o755)
}

// Capabilities returns the capability set of a container's process: the
// defaults adjusted by cap_add and cap_drop, or for a privileged container
// the engine's whole bounding set.
func Capabilities(s *core.ContainerSpec, host Host) ([]string, error) {
	if s.Privileged {
		return append([]string(nil), host.BoundingCaps...), nil
	}
	return adjustCaps(DefaultCapabilities(), s.CapAdd, s.CapDrop, host.BoundingCaps)
}

func adjustCaps(caps, add, drop, bounding []string) ([]string, error) {
	norm := func(field, c string) (string, error) {
		c = strings.ToUpper(strings.TrimSpace(c))
		if c == "ALL" {
			return c, nil
		}
		if !strings.HasPrefix(c, "CAP_") {
			c = "CAP_" + c
		}
		if !knownCapability(c) {
			return "", core.InvalidArgument(field, fmt.Errorf("unknown capability %q", c))
		}
		return c, nil
	}
	set := map[string]bool{}
	for _, c := range caps {
		set[c] = true
	}
	for _, c := range drop {
		n, err := norm("cap_drop", c)
		if err != nil {
			return nil, err
		}
		if n == "ALL" {
			set = map[string]bool{}
			continue
		}
		delete(set, n)
	}
	bound := map[string]bool{}
	for _, c := range bounding {
		bound[c] = true
	}
	for _, c := range add {
		n, err := norm("cap_add", c)
		if err != nil {
			return nil, err
		}
		if n == "ALL" {
			for _, b := range bounding {
				set[b] = true
			}
			continue
		}
		if !bound[n] {
			return nil, core.InvalidArgument("cap_add", fmt.Errorf("%s is not in the engine's capability bounding set", n))
		}
		set[n] = true
	}
	out := make([]string, 0, len(set))
	for c := range set {
		out = append(out, c)
	}
	sort.Strings(out)
	return out, nil
}

func namespaces(s *core.ContainerSpec, netnsPath string) ([]specs.LinuxNamespace, error) {
	ns := []specs.LinuxNamespace{
		{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace}, {Type: specs.MountNamespace},
	}
	switch s.PidNS.NSMode {
	case "", "private", core.NSContainer, core.NSPath:
		// A container's namespace is joined at init (JoinNamespaces); a
		// path's below.
	case "host":
		ns = ns[1:]
	default:
		return nil, core.InvalidArgument("pidns", fmt.Errorf("mode %q is not supported (private, host, container)", s.PidNS.NSMode))
	}
	if s.IpcNS.NSMode == core.NSHost {
		ns = slices.DeleteFunc(ns, func(n specs.LinuxNamespace) bool { return n.Type == specs.IPCNamespace })
	}
	if s.UtsNS.NSMode == core.NSHost {
		ns = slices.DeleteFunc(ns, func(n specs.LinuxNamespace) bool { return n.Type == specs.UTSNamespace })
	}
	// ns:PATH joins the namespace a path names (podman's ns:PATH).
	for _, p := range []struct {
		mode core.Namespace
		typ  specs.LinuxNamespaceType
	}{{s.PidNS, specs.PIDNamespace}, {s.IpcNS, specs.IPCNamespace}, {s.UtsNS, specs.UTSNamespace}} {
		if p.mode.NSMode != core.NSPath {
			continue
		}
		for i := range ns {
			if ns[i].Type == p.typ {
				ns[i].Path = p.mode.Value
			}
		}
	}
	switch s.CgroupNS.NSMode {
	case core.CgroupNSHost:
	case core.CgroupNSPrivate, core.CgroupNSContainer:
		// A container's namespace is joined at init (JoinNamespaces).
		ns = append(ns, specs.LinuxNamespace{Type: specs.CgroupNamespace})
	case core.CgroupNSPath:
		if !filepath.IsAbs(s.CgroupNS.Value) {
			return nil, core.InvalidArgument("cgroupns", fmt.Errorf("path %q is not absolute", s.CgroupNS.Value))
		}
		ns = append(ns, specs.LinuxNamespace{Type: specs.CgroupNamespace, Path: s.CgroupNS.Value})
	case "":
		if cgroups.Host().Unified() {
			ns = append(ns, specs.LinuxNamespace{Type: specs.CgroupNamespace})
		}
	default:
		return nil, core.InvalidArgument("cgroupns", fmt.Errorf("mode %q is not supported (host, private, container, path)", s.CgroupNS.NSMode))
	}
	switch s.NetNS.NSMode {
	case "", core.NetNSPrivate, core.NetNSNone:
		// A new network namespace; runc brings its loopback up.
		ns = append(ns, specs.LinuxNamespace{Type: specs.NetworkNamespace})
	case core.NetNSBridge:
		if netnsPath == "" {
			return nil, core.InvalidArgument("netns", errors.New("bridge networking needs the network backend"))
		}
		ns = append(ns, specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: netnsPath})
	case core.NetNSContainer:
		// The path of the other container's namespace is set at init,
		// when that container runs.
		ns = append(ns, specs.LinuxNamespace{Type: specs.NetworkNamespace})
	case core.NetNSHost:
	case core.NetNSPath:
		if !filepath.IsAbs(s.NetNS.Value) {
			return nil, core.InvalidArgument("netns", fmt.Errorf("path %q is not absolute", s.NetNS.Value))
		}
		ns = append(ns, specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: s.NetNS.Value})
	default:
		return nil, core.InvalidArgument("netns", fmt.Errorf("mode %q is not supported (none, host, private, bridge, path, container)", s.NetNS.NSMode))
	}
	return ns, nil
}

// SetEnv sets each "NAME=value" of add in env, replacing a variable of the
// same name or appending it.
func SetEnv(env, add []string) []string {
	for _, kv := range add {
		name, _, _ := strings.Cut(kv, "=")
		replaced := false
		for i, old := range env {
			if n, _, _ := strings.Cut(old, "="); n == name {
				env[i] = kv
				replaced = true
				break
			}
		}
		if !replaced {
			env = append(env, kv)
		}
	}
	return env
}

// joinNamespaces replaces the namespaces of ns that have a path in join
// (adding the ones ns lacks, such as a network namespace the request would
// otherwise share with the host).
func joinNamespaces(ns []specs.LinuxNamespace, join map[specs.LinuxNamespaceType]string) []specs.LinuxNamespace {
	if len(join) == 0 {
		return ns
	}
	seen := map[specs.LinuxNamespaceType]bool{}
	for i := range ns {
		if p, ok := join[ns[i].Type]; ok {
			ns[i].Path = p
			seen[ns[i].Type] = true
		}
	}
	types := make([]string, 0, len(join))
	for t := range join {
		if !seen[t] {
			types = append(types, string(t))
		}
	}
	sort.Strings(types)
	for _, t := range types {
		nt := specs.LinuxNamespaceType(t)
		ns = append(ns, specs.LinuxNamespace{Type: nt, Path: join[nt]})
	}
	return ns
}

// AddMissingEnv appends each "NAME=value" of add whose name env lacks.
func AddMissingEnv(env, add []string) []string {
	have := make(map[string]bool, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		have[name] = true
	}
	for _, kv := range add {
		if name, _, _ := strings.Cut(kv, "="); !have[name] {
			env = append(env, kv)
		}
	}
	return env
}

// EnvValue answers the value of name in env ("" when it has none).
func EnvValue(env []string, name string) string {
	for _, kv := range env {
		if n, v, _ := strings.Cut(kv, "="); n == name {
			return v
		}
	}
	return ""
}

// kernelPaths are the masked and read-only paths of an unprivileged
// container: Podman's, plus mask, less unmask ("ALL": every default one,
// read-only ones included, as Podman's unmask=ALL).
func kernelPaths(mask, unmask []string) (masked, readonly []string) {
	drop := map[string]bool{}
	all := false
	for _, p := range unmask {
		if p == "ALL" {
			all = true
		}
		drop[filepath.Clean(p)] = true
	}
	if !all {
		for _, p := range maskedPaths {
			if !drop[p] {
				masked = append(masked, p)
			}
		}
		for _, p := range readonlyPaths {
			if !drop[p] {
				readonly = append(readonly, p)
			}
		}
	}
	for _, p := range mask {
		if p = filepath.Clean(p); !slices.Contains(masked, p) {
			masked = append(masked, p)
		}
	}
	return masked, readonly
}

// SeccompUnconfined tells whether a container runs without a system call
// filter: it asked for none, or it is privileged and named no profile of
// its own (Podman's rule), or the kernel cannot filter.
func SeccompUnconfined(s *core.ContainerSpec, host Host) bool {
	if s.SeccompProfilePath == seccomp.Unconfined || !host.Seccomp {
		return true
	}
	return s.Privileged && !CustomSeccompProfile(s)
}

// CustomSeccompProfile tells whether the request names a profile file of
// its own (the path of Podman's default profile means the default).
func CustomSeccompProfile(s *core.ContainerSpec) bool {
	p := s.SeccompProfilePath
	return p != "" && p != seccomp.Unconfined && p != seccomp.PodmanDefaultPath
}

func applySeccomp(spec *specs.Spec, s *core.ContainerSpec, in Input) error {
	if SeccompUnconfined(s, in.Host) {
		if CustomSeccompProfile(s) && !in.Host.Seccomp {
			return core.InvalidArgument("seccomp_profile_path", errors.New("the kernel has no seccomp filters"))
		}
		return nil
	}
	if err := seccomp.Apply(spec, in.SeccompProfile); err != nil {
		return core.InvalidArgument("seccomp_profile_path", err)
	}
	return nil
}

// PingGroupRange is the sysctl every container with a network namespace of
// its own gets (DefaultPingGroupRange: any group may ping without
// CAP_NET_RAW), as Podman sets it.
const (
	PingGroupRange        = "net.ipv4.ping_group_range"
	DefaultPingGroupRange = "0 0"
)
