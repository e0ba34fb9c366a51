package dockerapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/blkiodev"
	containertypes "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	networktypes "github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/storage"
	"github.com/docker/go-connections/nat"

	"github.com/berth-project/berth/engine/internal/core"
)

// networkEndpoint is a container's endpoint on one network.
type networkEndpoint = networktypes.EndpointSettings

// inspectContainer is docker inspect's document for one container, made
// from the engine's inspect data and its record.
func (s *server) inspectContainer(ctx context.Context, name string, size bool) (*containertypes.InspectResponse, error) {
	in, err := s.deps.Containers.Inspect(ctx, name, size)
	if err != nil {
		return nil, err
	}
	c, err := s.deps.Containers.Lookup(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	st := in.State
	state := &containertypes.State{
		Status:     dockerState(c.State.String()),
		Running:    st.Running,
		Paused:     st.Paused,
		Restarting: st.Restarting,
		OOMKilled:  st.OOMKilled,
		Dead:       st.Dead,
		Pid:        st.Pid,
		ExitCode:   int(st.ExitCode),
		Error:      st.Error,
		StartedAt:  dockerTime(st.StartedAt),
		FinishedAt: dockerTime(st.FinishedAt),
	}
	if c.Spec.HealthConfig != nil && len(c.Spec.HealthConfig.Test) > 0 && c.Spec.HealthConfig.Test[0] != "NONE" {
		h := &containertypes.Health{Status: c.Health.Status, FailingStreak: c.Health.FailingStreak, Log: []*containertypes.HealthcheckResult{}}
		if h.Status == "" {
			h.Status = "starting"
		}
		state.Health = h
	}
	base := &containertypes.ContainerJSONBase{
		ID:             in.ID,
		Created:        dockerTime(in.Created),
		Path:           in.Path,
		Args:           in.Args,
		State:          state,
		Image:          imageID(c.ImageID),
		ResolvConfPath: in.ResolvConfPath,
		HostnamePath:   in.HostnamePath,
		HostsPath:      in.HostsPath,
		LogPath:        c.LogPath,
		Name:           "/" + in.Name,
		RestartCount:   int(in.RestartCount),
		Driver:         in.Driver,
		Platform:       "linux",
		ExecIDs:        nilIfEmpty(in.LiveExecIDs),
		HostConfig:     s.hostConfig(c, in),
	}
	base.HostConfig.Links = s.inspectLinks(ctx, c)
	if base.Args == nil {
		base.Args = []string{}
	}
	if in.GraphDriver != nil {
		base.GraphDriver = storage.DriverData{Name: in.GraphDriver.Name, Data: in.GraphDriver.Data}
	}
	if size {
		base.SizeRw = in.SizeRw
		rootfs := in.SizeRootFs
		base.SizeRootFs = &rootfs
	}
	out := &containertypes.InspectResponse{
		ContainerJSONBase: base,
		Mounts:            []containertypes.MountPoint{},
		Config:            s.config(c, in),
		NetworkSettings:   s.networkSettings(in, s.networkIDs(ctx)),
	}
	req := dockerRequestOf(c)
	for _, m := range in.Mounts {
		out.Mounts = append(out.Mounts, req.mountPoint(mountPoint(m)))
	}
	return out, nil
}

// dockerRequest is what a Docker create asked for of a container's
// storage: its HostConfig.Binds and .Mounts.
type dockerRequest struct {
	docker bool
	binds  []string
	mounts []mount.Mount
}

// dockerRequestOf reads c's; docker is false for a container the libpod
// API created (or a Docker one from before the engine kept them), shown
// from the engine's view.
func dockerRequestOf(c *core.Container) dockerRequest {
	r := dockerRequest{docker: c.Spec.DockerEnv, binds: c.Spec.DockerBinds}
	if len(c.Spec.DockerMounts) > 0 {
		if err := json.Unmarshal(c.Spec.DockerMounts, &r.mounts); err != nil {
			r.mounts = nil
		}
	}
	return r
}

// mountPoint shows mp as dockerd does for a container of the Docker API:
// Mode is a bind's mode as -v gave it ("ro", "rw", "ro,rshared"; none
// given, ""), "z" for a named volume given without one (dockerd's
// default label mode) and for a --mount volume; a volume or a tmpfs has no
// propagation.
func (r dockerRequest) mountPoint(mp containertypes.MountPoint) containertypes.MountPoint {
	if !r.docker {
		return mp
	}
	if mp.Type == mount.TypeVolume || mp.Type == mount.TypeTmpfs {
		mp.Propagation = ""
	}
	for _, b := range r.binds {
		parts := strings.Split(b, ":")
		if len(parts) < 2 || parts[1] != mp.Destination {
			continue
		}
		switch {
		case len(parts) == 3:
			mp.Mode = parts[2]
		case mp.Type == mount.TypeVolume:
			mp.Mode = "z"
		}
		return mp
	}
	for _, m := range r.mounts {
		if m.Target == mp.Destination && m.Type == mount.TypeVolume {
			mp.Mode = "z"
		}
	}
	return mp
}

// mountPoint is one of a container's mounts as Docker lists them.
func mountPoint(m core.InspectMount) containertypes.MountPoint {
	mp := containertypes.MountPoint{
		Type: mount.Type(m.Type), Name: m.Name, Source: m.Source, Destination: m.Destination,
		Driver: m.Driver, Mode: m.Mode, RW: m.RW, Propagation: mount.Propagation(m.Propagation),
	}
	if mp.Type == "" {
		mp.Type = mount.TypeBind
	}
	return mp
}

// networkIDs maps the engine's network names to their IDs (Docker's
// endpoints name a network by ID; the engine's records by name).
func (s *server) networkIDs(ctx context.Context) map[string]string {
	out := map[string]string{}
	nets, err := s.deps.Networks.List(ctx, nil)
	if err != nil {
		return out
	}
	for _, n := range nets {
		out[n.Name] = n.ID
	}
	// dockerd's host and none networks: a container in the host's network
	// namespace or in none has an endpoint on them.
	for _, name := range []string{"host", "none"} {
		if _, ok := out[name]; !ok {
			out[name] = predefinedNetworkID(name)
		}
	}
	return out
}

// fillEndpoint sets an endpoint's addresses from netavark's status: the
// first IPv4 and IPv6 address of the network's interface.
func fillEndpoint(ep *networkEndpoint, st core.StatusBlock) {
	for _, ifName := range slices.Sorted(maps.Keys(st.Interfaces)) {
		iface := st.Interfaces[ifName]
		if ep.MacAddress == "" && len(iface.MacAddress) > 0 {
			ep.MacAddress = net.HardwareAddr(iface.MacAddress).String()
		}
		for _, a := range iface.Subnets {
			ones, _ := a.IPNet.Mask.Size()
			switch {
			case a.IPNet.IP.To4() != nil && ep.IPAddress == "":
				ep.IPAddress, ep.IPPrefixLen = a.IPNet.IP.String(), ones
				if a.Gateway != nil {
					ep.Gateway = a.Gateway.String()
				}
			case a.IPNet.IP.To4() == nil && ep.GlobalIPv6Address == "":
				ep.GlobalIPv6Address, ep.GlobalIPv6PrefixLen = a.IPNet.IP.String(), ones
				if a.Gateway != nil {
					ep.IPv6Gateway = a.Gateway.String()
				}
			}
		}
	}
}

// config is inspect's Config: what the container runs, as created.
func (s *server) config(c *core.Container, in *core.InspectContainerData) *containertypes.Config {
	ic := in.Config
	cfg := &containertypes.Config{
		Hostname:     ic.Hostname,
		Domainname:   ic.DomainName,
		User:         ic.User,
		AttachStdin:  ic.AttachStdin,
		AttachStdout: ic.AttachStdout,
		AttachStderr: ic.AttachStderr,
		Tty:          ic.Tty,
		OpenStdin:    ic.OpenStdin,
		StdinOnce:    ic.StdinOnce,
		Env:          dockerEnv(ic.Env, c.Spec.Env, c.ImageEnv),
		Cmd:          ic.Cmd,
		Image:        firstNonEmpty(c.Spec.RawImageName, c.Image),
		Volumes:      nilIfNoVolumes(ic.Volumes),
		WorkingDir:   firstNonEmpty(c.Spec.WorkDir, c.ImageWorkDir),
		Labels:       ic.Labels,
		Entrypoint:   c.Spec.Entrypoint,
	}
	if cfg.Entrypoint == nil {
		cfg.Entrypoint = c.ImageEntrypoint
	}
	if cfg.Labels == nil {
		cfg.Labels = map[string]string{}
	}
	// As dockerd: the stop signal the request or the image set, none when
	// neither did (the engine stops with SIGTERM then).
	switch {
	case c.Spec.StopSignal != nil:
		cfg.StopSignal = signalName(int(*c.Spec.StopSignal))
	case c.ImageStopSignal != "":
		cfg.StopSignal = c.ImageStopSignal
	}
	if c.Spec.StopTimeout != nil {
		t := int(*c.Spec.StopTimeout)
		cfg.StopTimeout = &t
	}
	if hc := c.Spec.HealthConfig; hc != nil {
		cfg.Healthcheck = &containertypes.HealthConfig{Test: hc.Test, Interval: hc.Interval, Timeout: hc.Timeout, StartPeriod: hc.StartPeriod, Retries: hc.Retries}
	}
	if len(c.Spec.Expose) > 0 || len(c.Spec.PortMappings) > 0 {
		cfg.ExposedPorts = nat.PortSet{}
		for port, proto := range c.Spec.Expose {
			cfg.ExposedPorts[nat.Port(strconv.Itoa(int(port))+"/"+firstProto(proto))] = struct{}{}
		}
		for _, p := range c.Spec.PortMappings {
			cfg.ExposedPorts[nat.Port(strconv.Itoa(int(p.ContainerPort))+"/"+firstProto(p.Protocol))] = struct{}{}
		}
	}
	return cfg
}

func firstProto(p string) string {
	if p, _, _ = strings.Cut(p, ","); p == "" {
		return "tcp"
	}
	return p
}

// hostConfig is inspect's HostConfig.
func (s *server) hostConfig(c *core.Container, in *core.InspectContainerData) *containertypes.HostConfig {
	ih := in.HostConfig
	hc := &containertypes.HostConfig{
		Binds:           dockerBinds(ih.Binds),
		NetworkMode:     containertypes.NetworkMode(s.networkMode(c)),
		PortBindings:    nat.PortMap{},
		AutoRemove:      ih.AutoRemove,
		VolumesFrom:     ih.VolumesFrom,
		CapAdd:          ih.CapAdd,
		CapDrop:         ih.CapDrop,
		DNS:             ih.DNS,
		DNSOptions:      ih.DNSOptions,
		DNSSearch:       ih.DNSSearch,
		ExtraHosts:      ih.ExtraHosts,
		GroupAdd:        ih.GroupAdd,
		IpcMode:         containertypes.IpcMode(ih.IpcMode),
		CgroupnsMode:    containertypes.CgroupnsMode(ih.CgroupnsMode),
		OomScoreAdj:     ih.OomScoreAdj,
		Privileged:      ih.Privileged,
		PublishAllPorts: ih.PublishAllPorts,
		ReadonlyRootfs:  ih.ReadonlyRootfs,
		SecurityOpt:     ih.SecurityOpt,
		Tmpfs:           dockerTmpfsView(ih.Tmpfs),
		ShmSize:         ih.ShmSize,
		Runtime:         c.Runtime,
		Sysctls:         c.Spec.Sysctl,
		Annotations:     c.Spec.Annotations,
		Init:            &c.Spec.Init,
		LogConfig:       dockerInspectLogConfig(&c.Spec),
		RestartPolicy:   containertypes.RestartPolicy{Name: containertypes.RestartPolicyMode(firstNonEmpty(c.Spec.RestartPolicy, "no"))},
	}
	if req := dockerRequestOf(c); req.docker {
		// As the create sent them: -v's binds and --mount's mounts apart
		// (the engine's view lists both as binds, and --mount's tmpfs
		// under Tmpfs).
		hc.Binds, hc.Mounts = req.binds, req.mounts
		for _, m := range req.mounts {
			if m.Type == mount.TypeTmpfs {
				delete(hc.Tmpfs, m.Target)
			}
		}
		if len(hc.Tmpfs) == 0 {
			hc.Tmpfs = nil
		}
	}
	if m := c.Spec.PidNS.NSMode; m == core.NSHost || m == core.NSContainer {
		hc.PidMode = containertypes.PidMode(ih.PidMode)
	}
	if c.Spec.UtsNS.NSMode == core.NSHost {
		hc.UTSMode = containertypes.UTSMode(core.NSHost)
	}
	if c.Spec.RestartTries != nil {
		hc.RestartPolicy.MaximumRetryCount = int(*c.Spec.RestartTries)
	}
	hc.Resources = containertypes.Resources{
		CPUShares: int64(ih.CPUShares), Memory: ih.Memory, NanoCPUs: ih.NanoCpus,
		BlkioWeight: ih.BlkioWeight, CPUPeriod: int64(ih.CPUPeriod), CPUQuota: ih.CPUQuota,
		CpusetCpus: ih.CpusetCpus, CpusetMems: ih.CpusetMems, MemoryReservation: ih.MemoryReservation,
		MemorySwap: ih.MemorySwap,
	}
	for _, t := range []struct {
		from []core.InspectBlkioThrottleDevice
		to   *[]*blkiodev.ThrottleDevice
	}{
		{ih.BlkioDeviceReadBps, &hc.BlkioDeviceReadBps}, {ih.BlkioDeviceWriteBps, &hc.BlkioDeviceWriteBps},
		{ih.BlkioDeviceReadIOps, &hc.BlkioDeviceReadIOps}, {ih.BlkioDeviceWriteIOps, &hc.BlkioDeviceWriteIOps},
	} {
		for _, d := range t.from {
			*t.to = append(*t.to, &blkiodev.ThrottleDevice{Path: d.Path, Rate: d.Rate})
		}
	}
	if ih.PidsLimit > 0 {
		v := ih.PidsLimit
		hc.PidsLimit = &v
	}
	for _, u := range ih.Ulimits {
		hc.Ulimits = append(hc.Ulimits, &containertypes.Ulimit{Name: strings.ToLower(strings.TrimPrefix(u.Name, "RLIMIT_")), Hard: u.Hard, Soft: u.Soft})
	}
	for _, d := range ih.Devices {
		hc.Devices = append(hc.Devices, containertypes.DeviceMapping{PathOnHost: d.PathOnHost, PathInContainer: d.PathInContainer, CgroupPermissions: d.CgroupPermissions})
	}
	hc.DeviceCgroupRules = append(hc.DeviceCgroupRules, ih.DeviceCgroupRules...)
	for _, name := range core.CDIDevices(c.Spec.Devices) {
		// Docker shows a CDI device as a request of the cdi driver.
		hc.DeviceRequests = append(hc.DeviceRequests, containertypes.DeviceRequest{Driver: "cdi", DeviceIDs: []string{name}})
	}
	for _, p := range c.Spec.PortMappings {
		n := max(int(p.Range), 1)
		for i := 0; i < n; i++ {
			key := nat.Port(strconv.Itoa(int(p.ContainerPort)+i) + "/" + firstProto(p.Protocol))
			hc.PortBindings[key] = append(hc.PortBindings[key], nat.PortBinding{HostIP: p.HostIP, HostPort: strconv.Itoa(int(p.HostPort) + i)})
		}
	}
	return hc
}

// networkMode is Docker's name for a container's network mode.
func (s *server) networkMode(c *core.Container) string {
	switch c.Spec.NetNS.NSMode {
	case core.NetNSHost:
		return "host"
	case core.NetNSNone:
		return "none"
	case core.NetNSContainer:
		return "container:" + c.Spec.NetNS.Value
	case core.NetNSBridge:
		if _, ok := c.Spec.Networks[s.cfg.DefaultNetwork]; ok || len(c.Spec.Networks) == 0 {
			return "bridge"
		}
		names := make([]string, 0, len(c.Spec.Networks))
		for n := range c.Spec.Networks {
			names = append(names, n)
		}
		return minString(names)
	}
	return "none"
}

// networkSettings is inspect's NetworkSettings.
func (s *server) networkSettings(in *core.InspectContainerData, networkIDs map[string]string) *containertypes.NetworkSettings {
	ns := &containertypes.NetworkSettings{Networks: map[string]*networkEndpoint{}}
	src := in.NetworkSettings
	if src == nil {
		return ns
	}
	ns.SandboxKey = src.SandboxKey
	ns.Ports = nat.PortMap{}
	for port, binds := range src.Ports {
		key := nat.Port(port)
		if binds == nil {
			ns.Ports[key] = nil
			continue
		}
		for _, b := range binds {
			// dockerd names the address it listens on: all of IPv4's
			// where the client gave none (as ps shows it).
			ip := b.HostIP
			if ip == "" {
				ip = "0.0.0.0"
			}
			ns.Ports[key] = append(ns.Ports[key], nat.PortBinding{HostIP: ip, HostPort: b.HostPort})
		}
	}
	ns.DefaultNetworkSettings = containertypes.DefaultNetworkSettings{
		EndpointID: src.EndpointID, Gateway: src.Gateway, IPAddress: src.IPAddress, IPPrefixLen: src.IPPrefixLen,
		IPv6Gateway: src.IPv6Gateway, GlobalIPv6Address: src.GlobalIPv6Address, GlobalIPv6PrefixLen: src.GlobalIPv6PrefixLen,
		MacAddress: src.MacAddress,
	}
	for name, n := range src.Networks {
		if n == nil {
			continue
		}
		docker := s.dockerNetworkName(name)
		ep := &networkEndpoint{
			NetworkID: firstNonEmpty(networkIDs[name], n.NetworkID), EndpointID: n.EndpointID, Gateway: n.Gateway, IPAddress: n.IPAddress,
			IPPrefixLen: n.IPPrefixLen, IPv6Gateway: n.IPv6Gateway, GlobalIPv6Address: n.GlobalIPv6Address,
			GlobalIPv6PrefixLen: n.GlobalIPv6PrefixLen, MacAddress: n.MacAddress, Aliases: n.Aliases,
			DriverOpts: n.DriverOpts, DNSNames: append([]string{in.Name, in.ID[:12]}, n.Aliases...),
		}
		if docker == "bridge" {
			ep.DNSNames = nil
		}
		ns.Networks[docker] = ep
	}
	if in.HostConfig != nil {
		predefinedEndpoint(ns.Networks, in.HostConfig.NetworkMode, networkIDs)
	}
	if in.State != nil && in.State.Running {
		// dockerd's endpoints and sandbox exist while the container runs.
		for _, ep := range ns.Networks {
			ep.EndpointID = endpointID(in.ID, ep.NetworkID)
		}
		if ep := ns.Networks["bridge"]; ep != nil && ns.DefaultNetworkSettings.IPAddress != "" {
			ns.DefaultNetworkSettings.EndpointID = ep.EndpointID
		}
		if ns.SandboxKey != "" {
			ns.SandboxID = hashID("sandbox", ns.SandboxKey)
		}
	}
	return ns
}

// endpointID names a running container's attachment to a network, as
// dockerd's endpoint ID does (64 hex digits): the same in the container's
// inspect and in the network's.
func endpointID(containerID, networkID string) string {
	return hashID("endpoint", containerID, networkID)
}

// hashID is 64 hex digits of the SHA-256 of kind and parts.
func hashID(kind string, parts ...string) string {
	sum := sha256.Sum256([]byte(kind + "\x00" + strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:])
}

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}

func minString(v []string) string {
	m := v[0]
	for _, s := range v[1:] {
		if s < m {
			m = s
		}
	}
	return m
}

// dockerInspectLogConfig is json-file (the k8s-file log, read as Docker
// reads its own) or journald with its tag.
func dockerInspectLogConfig(s *core.ContainerSpec) containertypes.LogConfig {
	lc := containertypes.LogConfig{Type: "json-file", Config: map[string]string{}}
	if s.LogDriver() == core.LogDriverNone {
		lc.Type = core.LogDriverNone
	}
	if s.LogDriver() == core.LogDriverJournald {
		lc.Type = core.LogDriverJournald
		if tag := s.LogTag(); tag != "" {
			lc.Config["tag"] = tag
		}
	}
	if size := s.LogSizeMax(); size > 0 {
		lc.Config["max-size"] = strconv.FormatInt(size, 10)
	}
	return lc
}

// dockerBinds are a container's binds in the -v syntax dockerd accepts
// and shows: SOURCE:DEST, then ro, an SELinux label (z, Z), a propagation
// other than the default rprivate, nocopy. The engine's own words (rbind,
// rw, rprivate, and options -v cannot say) are left out, so that a client
// that creates a container from another's inspect (as Watchtower does)
// sends binds dockerd, and the engine, accept.
func dockerBinds(binds []string) []string {
	if binds == nil {
		return nil
	}
	out := make([]string, 0, len(binds))
	for _, b := range binds {
		src, rest, _ := strings.Cut(b, ":")
		dst, opts, _ := strings.Cut(rest, ":")
		var keep []string
		for _, o := range strings.Split(opts, ",") {
			switch o {
			case "ro", "z", "Z", "nocopy", "shared", "rshared", "slave", "rslave", "private":
				keep = append(keep, o)
			}
		}
		v := src + ":" + dst
		if len(keep) > 0 {
			v += ":" + strings.Join(keep, ",")
		}
		out = append(out, v)
	}
	return out
}

// dockerTmpfsView is HostConfig.Tmpfs as dockerd shows it: each tmpfs's
// options without the defaults a Docker create completes them with (see
// dockerTmpfs) or the engine adds (rw, rprivate, tmpcopyup); a plain
// --tmpfs shows "".
func dockerTmpfsView(tmpfs map[string]string) map[string]string {
	if tmpfs == nil {
		return nil
	}
	out := make(map[string]string, len(tmpfs))
	for dst, opts := range tmpfs {
		var keep []string
		for _, o := range strings.Split(opts, ",") {
			switch o {
			case "", "rw", "rprivate", "noexec", "nosuid", "nodev", "notmpcopyup", "tmpcopyup":
			default:
				keep = append(keep, o)
			}
		}
		out[dst] = strings.Join(keep, ",")
	}
	return out
}

// nilIfEmpty is list, or nil (JSON null, as dockerd answers) where empty.
func nilIfEmpty(list []string) []string {
	if len(list) == 0 {
		return nil
	}
	return list
}

// predefinedEndpoint gives a container in network mode host or none,
// which has no network of the engine's, its endpoint on dockerd's network
// of that name, as dockerd lists it.
func predefinedEndpoint(eps map[string]*networkEndpoint, mode string, networkIDs map[string]string) {
	if len(eps) == 0 && (mode == "host" || mode == "none") {
		eps[mode] = &networkEndpoint{NetworkID: networkIDs[mode]}
	}
}

// dockerEnv is a container's environment as dockerd's inspect shows it:
// the image's and the request's variables, without those the engine adds
// (HOSTNAME, HOME, TERM with a terminal; TERM and container=podman always
// for a container of the libpod API) unless the request or the image set them, so that a client that
// creates a container from another's inspect (Watchtower) does not copy
// the old container's hostname into the new.
func dockerEnv(env []string, requested map[string]string, image []string) []string {
	fromImage := map[string]bool{}
	for _, kv := range image {
		k, _, _ := strings.Cut(kv, "=")
		fromImage[k] = true
	}
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		_, asked := requested[k]
		if !asked && !fromImage[k] && (k == "container" || k == "HOSTNAME" || k == "HOME" || k == "TERM") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// nilIfNoVolumes is Config.Volumes, null where none, as dockerd answers.
func nilIfNoVolumes(v map[string]struct{}) map[string]struct{} {
	if len(v) == 0 {
		return nil
	}
	return v
}
