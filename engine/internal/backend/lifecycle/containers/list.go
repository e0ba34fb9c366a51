package containers

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	units "github.com/docker/go-units"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/backend/execution/oci"
	"github.com/berth-project/berth/engine/internal/core"
)

// List returns the containers matching opts, newest first.
func (m *Manager) List(ctx context.Context, opts core.ListContainersOptions) ([]core.ListContainer, error) {
	match, err := m.compileFilters(opts.Filters, listFilters...)
	if err != nil {
		return nil, err
	}
	m.mu.RLock()
	recs := make([]record, 0, len(m.byID))
	for _, e := range m.byID {
		if !opts.All && e.rec.State != core.StateRunning && e.rec.State != core.StatePaused {
			if _, hasStatus := opts.Filters["status"]; !hasStatus {
				continue
			}
		}
		ok, err := match(ctx, &e.rec)
		if err != nil {
			m.mu.RUnlock()
			return nil, err
		}
		if ok {
			recs = append(recs, e.rec)
		}
	}
	m.mu.RUnlock()
	sort.Slice(recs, func(i, j int) bool {
		if recs[i].Created.Equal(recs[j].Created) {
			return recs[i].ID < recs[j].ID
		}
		return recs[i].Created.After(recs[j].Created)
	})
	if opts.Last > 0 && len(recs) > opts.Last {
		recs = recs[:opts.Last]
	}
	out := make([]core.ListContainer, 0, len(recs))
	pods := m.podResolver()
	for i := range recs {
		lc := listEntry(&recs[i])
		if lc.Pod != "" && pods != nil {
			lc.PodName = pods.PodName(lc.Pod)
		}
		if opts.Size {
			lc.Size = m.size(&recs[i])
		}
		if opts.Namespaces && recs[i].PID > 0 {
			lc.Namespaces = processNamespaces(recs[i].PID)
		}
		if opts.Detail {
			lc.MountDetails = inspectMounts(&recs[i].Spec, recs[i].Volumes)
			lc.NetworkDetails = recs[i].NetStatus
		}
		out = append(out, lc)
	}
	return out, nil
}

// Running returns snapshots of the running and paused containers, newest
// first as List orders them: what a stats request of every container
// samples, without the rows List builds.
func (m *Manager) Running(ctx context.Context) []*core.Container {
	m.mu.RLock()
	out := make([]*core.Container, 0, len(m.byID))
	for _, e := range m.byID {
		if e.rec.State == core.StateRunning || e.rec.State == core.StatePaused {
			rec := copyRecord(e.rec)
			out = append(out, &rec.Container)
		}
	}
	m.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Created.Equal(out[j].Created) {
			return out[i].ID < out[j].ID
		}
		return out[i].Created.After(out[j].Created)
	})
	return out
}

func (m *Manager) size(rec *record) *core.ContainerSize {
	sz := &core.ContainerSize{}
	if rw, err := m.store.ContainerSize(rec.ID); err == nil {
		sz.RwSize = rw
	}
	if img, err := m.store.Image(rec.ImageID); err == nil {
		if s, err := m.store.ImageSize(img.ID); err == nil {
			sz.RootFsSize = s + sz.RwSize
		}
	}
	return sz
}

func listEntry(r *record) core.ListContainer {
	cmd := append([]string{}, r.Path)
	cmd = append(cmd, r.Args...)
	if r.Path == "" {
		cmd = append(append([]string{}, r.Spec.Entrypoint...), r.Spec.Command...)
	}
	exited := r.State == core.StateExited || r.State == core.StateStopped
	lc := core.ListContainer{
		AutoRemove: r.Spec.Remove,
		Command:    cmd,
		Created:    r.Created,
		CreatedAt:  humanDuration(time.Since(r.Created)) + " ago",
		Exited:     exited,
		ExitCode:   r.ExitCode,
		ID:         r.ID,
		Image:      r.Image,
		RawImage:   r.Spec.RawImageName,
		ImageID:    r.ImageID,
		IsInfra:    r.IsInfra,
		Labels:     r.Spec.Labels,
		Mounts:     mountDestinations(r),
		Names:      []string{r.Name},
		Networks:   networkNames(r),
		Pid:        r.PID,
		Pod:        r.Pod,
		Ports:      append([]core.PortMapping{}, r.Spec.PortMappings...),
		State:      r.State.String(),
		Status:     healthStatus(r),
	}
	lc.NetworkMode = netMode(&r.Spec)
	if !r.StartedAt.IsZero() {
		lc.StartedAt = r.StartedAt.Unix()
	}
	if !r.FinishedAt.IsZero() {
		lc.ExitedAt = r.FinishedAt.Unix()
	}
	if lc.Labels == nil {
		lc.Labels = map[string]string{}
	}
	return lc
}

func mountDestinations(r *record) []string {
	out := []string{}
	for _, v := range r.Volumes {
		out = append(out, v.Dest)
	}
	for _, mt := range r.Spec.Mounts {
		out = append(out, mt.Destination)
	}
	return out
}

// healthStatus is ListContainer's Status: the health of a container with a
// healthcheck ("healthy", "unhealthy", "starting"), else empty; clients
// derive the rest of the status text from State and the timestamps.
func healthStatus(r *record) string {
	if r.Spec.HealthConfig == nil || len(r.Spec.HealthConfig.Test) == 0 || r.Spec.HealthConfig.Test[0] == "NONE" {
		return ""
	}
	if r.Health.Status == "" && r.State == core.StateRunning {
		return "starting"
	}
	return r.Health.Status
}

func humanDuration(d time.Duration) string {
	switch s := int(d.Seconds()); {
	case s < 1:
		return "Less than a second"
	case s == 1:
		return "1 second"
	case s < 60:
		return fmt.Sprintf("%d seconds", s)
	case s < 3600:
		if s/60 == 1 {
			return "About a minute"
		}
		return fmt.Sprintf("%d minutes", s/60)
	case s < 48*3600:
		if s/3600 == 1 {
			return "About an hour"
		}
		return fmt.Sprintf("%d hours", s/3600)
	default:
		return fmt.Sprintf("%d days", s/86400)
	}
}

// Inspect returns a container's details in Podman's shape.
func (m *Manager) Inspect(ctx context.Context, nameOrID string, size bool) (*core.InspectContainerData, error) {
	e, err := m.lookup(nameOrID)
	if err != nil {
		return nil, err
	}
	r := m.snapshot(e)
	s := &r.Spec
	// As Podman: the environment of the last init; a container never
	// initialised (created: the engine writes its spec then, Podman at
	// init) shows neither HOSTNAME nor HOME, which come at init.
	hostname, home := "", ""
	if r.State != core.StateConfigured {
		hostname, home = hostnameOf(&r), r.Home
	}
	env := oci.MergeEnv(r.ImageEnv, s, hostname, home)
	cmd := s.Command
	if len(cmd) == 0 && s.Entrypoint == nil {
		cmd = r.ImageCmd
	}
	entrypoint := r.ImageEntrypoint
	if s.Entrypoint != nil {
		entrypoint = s.Entrypoint
	}
	caps, err := oci.Capabilities(s, m.host)
	if err != nil {
		caps = []string{}
	}
	// Like Podman: the capabilities added to and dropped from the defaults.
	capAdd, capDrop := []string{}, []string{}
	if !s.Privileged {
		capAdd, capDrop = capDiff(oci.DefaultCapabilities(), caps)
	}
	restart := s.RestartPolicy
	var tries uint
	if s.RestartTries != nil {
		tries = *s.RestartTries
	}
	annotations := oci.Annotations(s)
	logCount, logSize := s.HealthLogLimits()
	data := &core.InspectContainerData{
		ID: r.ID, Created: r.Created, Path: r.Path, Args: nonNil(r.Args), Pod: r.Pod, IsInfra: r.IsInfra,
		State: &core.InspectContainerState{
			OciVersion: "1.0.2-dev",
			Status:     r.State.String(),
			Running:    r.State == core.StateRunning,
			Paused:     r.State == core.StatePaused,
			Pid:        r.PID, ConmonPid: r.ConmonPID,
			ExitCode: r.ExitCode, Error: r.Error, OOMKilled: r.OOMKilled,
			StartedAt: r.StartedAt, FinishedAt: r.FinishedAt,
			Health:       r.Health,
			CgroupPath:   r.CgroupPath,
			Checkpointed: r.Checkpointed, CheckpointPath: r.CheckpointPath, CheckpointLog: r.CheckpointLog,
			CheckpointedAt: r.CheckpointedAt,
			Restored:       r.Restored, RestoreLog: r.RestoreLog, RestoredAt: r.RestoredAt,
		},
		Image: r.ImageID, ImageDigest: r.ImageDigest, ImageName: r.Image, Rootfs: inspectRootfs(&r),
		ResolvConfPath:     r.StaticDir + "/resolv.conf",
		HostnamePath:       r.StaticDir + "/hostname",
		HostsPath:          r.StaticDir + "/hosts",
		StaticDir:          r.StaticDir,
		OCIConfigPath:      r.Bundle + "/config.json",
		OCIRuntime:         r.Runtime,
		ConmonPidFile:      r.Bundle + "/conmon.pid",
		PidFile:            r.Bundle + "/pidfile",
		Name:               r.Name,
		RestartCount:       int32(r.RestartCount),
		Driver:             m.store.GraphDriverName(),
		EffectiveCaps:      caps,
		BoundingCaps:       caps,
		SeccompProfilePath: m.seccompProfilePath(&r),
		AppArmorProfile:    m.inspectAppArmor(s),
		ExecIDs:            []string{},
		GraphDriver:        &core.DriverData{Name: m.store.GraphDriverName(), Data: map[string]string{}},
		Mounts:             inspectMounts(s, r.Volumes),
		Dependencies:       dependencies(&r),
		NetworkSettings:    m.networkSettings(&r, 0),
		Config: &core.InspectContainerConfig{
			Hostname: hostnameOf(&r), DomainName: s.Domainname, User: s.User,
			AttachStdin: s.Stdin, AttachStdout: true, AttachStderr: true,
			Tty: s.Terminal, OpenStdin: s.Stdin,
			Env: env, Cmd: nonNil(cmd), Image: r.Image,
			Volumes:    map[string]struct{}{},
			WorkingDir: firstNonEmpty(s.WorkDir, r.ImageWorkDir, "/"),
			Entrypoint: strings.Join(entrypoint, " "),
			Labels:     s.Labels, Annotations: annotations,
			StopSignal:                 uint(m.stopSignal(r)),
			Healthcheck:                s.HealthConfig,
			HealthcheckOnFailureAction: s.HealthCheckOnFailureAction.String(),
			StartupHealthCheck:         s.StartupHealthConfig,
			HealthLogDestination:       firstNonEmpty(s.HealthLogDestination, core.HealthLogLocal),
			HealthMaxLogCount:          uint(logCount),
			HealthMaxLogSize:           uint(logSize),
			CreateCommand:              s.CreateCommand,
			Umask:                      firstNonEmpty(s.Umask, "0022"),
			Timezone:                   s.Timezone,
			Timeout:                    s.Timeout,
			StopTimeout:                derefUint(s.StopTimeout, defaultStopTimeout),
		},
		HostConfig: &core.InspectContainerHostConfig{
			Binds:           binds(s, r.Volumes),
			CgroupManager:   m.inspectCgroupManager(&r),
			CgroupMode:      nsModeString(s.CgroupNS, core.CgroupNSHost),
			LogConfig:       inspectLogConfig(&r),
			NetworkMode:     netMode(s),
			PortBindings:    portBindings(&r, false),
			PublishAllPorts: s.PublishExposedPorts,
			RestartPolicy:   &core.InspectRestartPolicy{Name: restart, MaximumRetryCount: tries},
			AutoRemove:      s.Remove,
			VolumesFrom:     []string{},
			CapAdd:          capAdd, CapDrop: capDrop, Devices: inspectDevices(s.Devices), DeviceCgroupRules: deviceCgroupRules(s.DeviceCgroupRules),
			DNS: nonNil(s.DNSServers), DNSOptions: nonNil(s.DNSOptions), DNSSearch: nonNil(s.DNSSearch),
			ExtraHosts: nonNil(s.HostAdd), GroupAdd: nonNil(s.Groups),
			IpcMode: nsModeString(s.IpcNS, core.IPCNSShareable), Cgroup: "", Cgroups: inspectCgroups(s.CgroupsMode), Links: []string{},
			PidMode:      nsModeString(s.PidNS, "private"),
			CgroupnsMode: nsModeString(s.CgroupNS, core.CgroupNSHost),
			Privileged:   s.Privileged, ReadonlyRootfs: s.ReadOnly,
			Annotations: annotations,
			SecurityOpt: securityOpts(s), Tmpfs: tmpfs(s), UTSMode: nsModeString(s.UtsNS, "private"), UsernsMode: usernsMode(s),
			IDMappings: inspectIDMappings(&r),
			ShmSize:    shmSize(s), Runtime: "oci", ConsoleSize: []uint{0, 0},
			CgroupParent: inspectCgroupParent(&r),
			Ulimits:      m.ulimits(s),
			Init:         s.Init,
		},
	}
	if s.OOMScoreAdj != nil {
		data.HostConfig.OomScoreAdj = *s.OOMScoreAdj
	}
	if res := s.Resources; res != nil {
		if mem := res.Memory; mem != nil {
			data.HostConfig.Memory = deref64(mem.Limit)
			data.HostConfig.MemorySwap = deref64(mem.Swap)
			data.HostConfig.MemoryReservation = deref64(mem.Reservation)
			// As Podman shows them: -1 is the kernel's default swappiness.
			data.HostConfig.MemorySwappiness = -1
			if mem.Swappiness != nil {
				data.HostConfig.MemorySwappiness = int64(*mem.Swappiness)
			}
			if mem.DisableOOMKiller != nil {
				data.HostConfig.OomKillDisable = *mem.DisableOOMKiller
			}
		}
		if cpu := res.CPU; cpu != nil {
			if cpu.Shares != nil {
				data.HostConfig.CPUShares = *cpu.Shares
			}
			data.HostConfig.CPUQuota = deref64(cpu.Quota)
			if cpu.Period != nil {
				data.HostConfig.CPUPeriod = *cpu.Period
			}
			data.HostConfig.CpusetCpus = cpu.Cpus
			data.HostConfig.CpusetMems = cpu.Mems
		}
		if p := res.Pids; p != nil {
			data.HostConfig.PidsLimit = deref64(p.Limit)
		}
	}
	if s.CPUQuota != 0 {
		data.HostConfig.CPUQuota = s.CPUQuota
	}
	if s.CPUPeriod != 0 {
		data.HostConfig.CPUPeriod = s.CPUPeriod
	}
	data.HostConfig.BlkioDeviceReadBps = core.InspectThrottles(s.ThrottleReadBpsDevice)
	data.HostConfig.BlkioDeviceWriteBps = core.InspectThrottles(s.ThrottleWriteBpsDevice)
	data.HostConfig.BlkioDeviceReadIOps = core.InspectThrottles(s.ThrottleReadIOPSDevice)
	data.HostConfig.BlkioDeviceWriteIOps = core.InspectThrottles(s.ThrottleWriteIOPSDevice)
	if hc := data.HostConfig; hc.CPUQuota > 0 && hc.CPUPeriod > 0 {
		hc.NanoCpus = hc.CPUQuota * 1e9 / int64(hc.CPUPeriod)
	}
	if data.Config.Labels == nil {
		data.Config.Labels = map[string]string{}
	}
	m.graphDriverData(&r, data.GraphDriver.Data)
	if r.Mounted {
		data.GraphDriver.Data["MergedDir"] = r.Rootfs
	}
	if size {
		sz := m.size(&r)
		rw := sz.RwSize
		data.SizeRw = &rw
		data.SizeRootFs = sz.RootFsSize
	}
	m.mu.RLock()
	execs := m.execs
	m.mu.RUnlock()
	if execs != nil {
		kept, live, err := execs.ExecSessionIDs(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		data.ExecIDs, data.LiveExecIDs = append(data.ExecIDs, kept...), live
	}
	return data, nil
}

func (m *Manager) ulimits(s *core.ContainerSpec) []core.InspectUlimit {
	rl, _, err := oci.Rlimits(s.Rlimits, m.host)
	if err != nil {
		return []core.InspectUlimit{}
	}
	out := make([]core.InspectUlimit, 0, len(rl))
	for _, l := range rl {
		out = append(out, core.InspectUlimit{Name: l.Type, Soft: clampInt64(l.Soft), Hard: clampInt64(l.Hard)})
	}
	return out
}

// clampInt64 shows an unlimited (or out-of-range) limit as -1, as Podman does.
func clampInt64(v uint64) int64 {
	if v > 1<<63-1 {
		return -1
	}
	return int64(v)
}

func hostnameOf(r *record) string {
	if r.PodJoin.Hostname != "" {
		return r.PodJoin.Hostname
	}
	if r.Spec.Hostname != "" {
		return r.Spec.Hostname
	}
	return r.ID[:12]
}

func inspectMounts(s *core.ContainerSpec, vols []mountedVolume) []core.InspectMount {
	out := []core.InspectMount{}
	for _, v := range vols {
		im := core.InspectMount{Type: "volume", Name: v.Name, Source: v.Source, Destination: v.Dest, Driver: "local",
			Options: nonNil(v.Options), RW: !slices.Contains(v.Options, "ro"), Propagation: "rprivate", SubPath: v.SubPath}
		out = append(out, im)
	}
	for _, mt := range s.Mounts {
		im := core.InspectMount{Type: mt.Type, Source: mt.Source, Destination: mt.Destination, Options: nonNil(mt.Options), RW: true, Propagation: "rprivate"}
		for _, o := range mt.Options {
			if o == "ro" {
				im.RW = false
			}
		}
		if im.Type == "" {
			im.Type = "bind"
		}
		out = append(out, im)
	}
	for _, iv := range s.ImageVolumes {
		out = append(out, core.InspectMount{Type: "image", Source: iv.Source, Destination: iv.Destination, Options: []string{}, RW: iv.ReadWrite, Propagation: "rprivate", SubPath: iv.SubPath})
	}
	return out
}

func binds(s *core.ContainerSpec, vols []mountedVolume) []string {
	out := []string{}
	for _, v := range vols {
		b := v.Name + ":" + v.Dest
		if len(v.Options) > 0 {
			b += ":" + strings.Join(v.Options, ",")
		}
		out = append(out, b)
	}
	for _, mt := range s.Mounts {
		if mt.Type == "bind" || mt.Type == "" {
			b := mt.Source + ":" + mt.Destination
			if len(mt.Options) > 0 {
				b += ":" + strings.Join(mt.Options, ",")
			}
			out = append(out, b)
		}
	}
	return out
}

// tmpfs maps each tmpfs mount's destination to its options as mounted.
func tmpfs(s *core.ContainerSpec) map[string]string {
	out := map[string]string{}
	for _, mt := range s.Mounts {
		if mt.Type == "tmpfs" {
			opts, err := oci.TmpfsOptions(mt.Options)
			if err != nil {
				opts = mt.Options
			}
			out[mt.Destination] = strings.Join(opts, ",")
		}
	}
	return out
}

// capDiff returns the capabilities of caps that defaults lacks (added) and
// those of defaults that caps lacks (dropped), each sorted.
func capDiff(defaults, caps []string) (added, dropped []string) {
	added, dropped = []string{}, []string{}
	for _, c := range caps {
		if !slices.Contains(defaults, c) {
			added = append(added, c)
		}
	}
	for _, c := range defaults {
		if !slices.Contains(caps, c) {
			dropped = append(dropped, c)
		}
	}
	slices.Sort(added)
	slices.Sort(dropped)
	return added, dropped
}

// graphDriverData adds the storage driver's directories of the container's
// layer (for overlay LowerDir, UpperDir, WorkDir), as Podman shows them.
func (m *Manager) graphDriverData(r *record, data map[string]string) {
	c, err := m.store.Container(r.ID)
	if err != nil {
		return
	}
	driver, err := m.store.GraphDriver()
	if err != nil {
		return
	}
	md, err := driver.Metadata(c.LayerID)
	if err != nil {
		return
	}
	for k, v := range md {
		data[k] = v
	}
}

func netMode(s *core.ContainerSpec) string {
	switch s.NetNS.NSMode {
	case "", core.NetNSPrivate:
		return "private"
	case core.NetNSPath:
		return "ns:" + s.NetNS.Value
	case core.NetNSContainer:
		return "container:" + s.NetNS.Value
	default:
		return s.NetNS.NSMode
	}
}

func shmSize(s *core.ContainerSpec) int64 {
	if s.ShmSize != nil {
		return *s.ShmSize
	}
	return oci.DefaultShmSize
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

func derefUint(p *uint, def uint) uint {
	if p == nil {
		return def
	}
	return *p
}

func deref64(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// inspectDevices lists the requested devices as Podman's inspect does.
func inspectDevices(devices []specs.LinuxDevice) []core.InspectDevice {
	out := []core.InspectDevice{}
	for _, d := range devices {
		if src, dst, perms, err := core.ParseDevice(d.Path); err == nil {
			out = append(out, core.InspectDevice{PathOnHost: src, PathInContainer: dst, CgroupPermissions: perms})
		}
	}
	return out
}

// deviceCgroupRules lists the rules as podman's --device-cgroup-rule takes them.
func deviceCgroupRules(rules []specs.LinuxDeviceCgroup) []string {
	out := []string{}
	for _, r := range rules {
		out = append(out, core.FormatDeviceCgroupRule(r))
	}
	return out
}

// inspectRootfs is the root a container was made from where it is a host
// directory (--rootfs, as Podman's inspect shows it), else the mount point
// of its layers while mounted.
func inspectRootfs(r *record) string {
	if r.Spec.Rootfs != "" {
		return r.Spec.Rootfs
	}
	return r.Rootfs
}

// inspectLogConfig is HostConfig.LogConfig: the driver, with journald the
// tag, and the k8s-file's path (conmon writes none for journald) and size
// limit, written as Podman writes it ("4.096kB"; "0B" for none).
func inspectLogConfig(r *record) *core.InspectLogConfig {
	lc := &core.InspectLogConfig{Type: r.Spec.LogDriver(), Config: map[string]string{}, Size: units.HumanSize(float64(r.Spec.LogSizeMax()))}
	if lc.Type == core.LogDriverJournald {
		if tag := r.Spec.LogTag(); tag != "" {
			lc.Tag = tag
		}
		return lc
	}
	if lc.Type == core.LogDriverNone {
		return lc
	}
	lc.Path = r.LogPath
	return lc
}

// Count counts the containers by state, as info reports them: running,
// paused, and every other state as stopped.
func (m *Manager) Count(context.Context) (core.ContainerCounts, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var c core.ContainerCounts
	for _, e := range m.byID {
		c.Number++
		switch e.rec.State {
		case core.StateRunning:
			c.Running++
		case core.StatePaused:
			c.Paused++
		default:
			c.Stopped++
		}
	}
	return c, nil
}

// processNamespaces names the namespaces of a process by their inode
// numbers, as podman ps --ns shows them ("" for one it cannot read).
func processNamespaces(pid int) core.ListContainerNamespaces {
	ns := func(kind string) string {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, kind))
		if err != nil {
			return ""
		}
		_, inode, ok := strings.Cut(strings.TrimSuffix(link, "]"), "[")
		if !ok {
			return ""
		}
		return inode
	}
	return core.ListContainerNamespaces{
		MNT: ns("mnt"), Cgroup: ns("cgroup"), IPC: ns("ipc"), NET: ns("net"),
		PIDNS: ns("pid"), UTS: ns("uts"), User: ns("user"),
	}
}
