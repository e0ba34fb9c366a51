package dockerapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/docker/docker/api/types/blkiodev"
	containertypes "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	networktypes "github.com/docker/docker/api/types/network"
	"github.com/docker/go-connections/nat"
	units "github.com/docker/go-units"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/shared/rlimit"
)

// containerCreate translates Docker's create body into the engine's
// creation spec. Options the engine cannot honour are refused with a 400
// naming them, never dropped.
func (s *server) containerCreate(w http.ResponseWriter, r *http.Request) {
	var req containertypes.CreateRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.Config == nil {
		writeError(w, core.InvalidArgument("body", errors.New("a container configuration is required")))
		return
	}
	if req.HostConfig == nil {
		req.HostConfig = &containertypes.HostConfig{}
	}
	name := strings.TrimPrefix(r.URL.Query().Get("name"), "/")
	if name != "" && !dockerContainerName.MatchString(name) {
		// dockerd's rule (two characters at least) and words.
		writeMessage(w, http.StatusBadRequest, "Invalid container name ("+name+"), only [a-zA-Z0-9][a-zA-Z0-9_.-] are allowed")
		return
	}
	spec, err := s.toSpec(name, req.Config, req.HostConfig, req.NetworkingConfig)
	if err != nil {
		writeError(w, err)
		return
	}
	if p := r.URL.Query().Get("platform"); p != "" {
		// The image must be for this platform: a local one for another is
		// a 404, on which the CLI pulls the platform's and creates again.
		if spec.ImageOS, spec.ImageArch, spec.ImageVariant, err = core.ParsePlatform("platform", p); err != nil {
			writeError(w, err)
			return
		}
		if spec.ImageOS != "linux" {
			writeError(w, core.InvalidArgument("platform", fmt.Errorf("%q: only linux containers run here", p)))
			return
		}
	}
	id, warnings, err := s.deps.Containers.Create(r.Context(), spec)
	var fe *core.FieldError
	if errors.As(err, &fe) && createFieldNames[fe.Field] != "" {
		fe.Field = createFieldNames[fe.Field]
	}
	if err != nil {
		if errors.Is(err, core.ErrPlatformMismatch) {
			writeMessage(w, http.StatusNotFound, err.Error())
			return
		}
		if errors.Is(err, core.ErrNoSuchImage) {
			writeMessage(w, http.StatusNotFound, "No such image: "+req.Config.Image)
			return
		}
		if holder, lerr := s.deps.Containers.Lookup(r.Context(), name); errors.Is(err, core.ErrNameInUse) && lerr == nil {
			// dockerd's words, which clients and scripts look for.
			writeMessage(w, http.StatusConflict, fmt.Sprintf("Conflict. The container name \"/%s\" is already in use by container \"%s\". You have to remove (or rename) that container to be able to reuse that name.", name, holder.ID))
			return
		}
		writeError(w, err)
		return
	}
	if warnings == nil {
		warnings = []string{}
	}
	writeJSON(w, http.StatusCreated, containertypes.CreateResponse{ID: id, Warnings: warnings})
}

// dockerContainerName is dockerd's rule for a container name.
var dockerContainerName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]+$`)

// createFieldNames are Docker's names of the spec members the backend's
// 400s name, where the backend checks what the translation passed on.
var createFieldNames = map[string]string{
	"domainname": "Config.Domainname",
	"pidns":      "HostConfig.PidMode",
	"ipcns":      "HostConfig.IpcMode",
	"shm_size":   "HostConfig.ShmSize",
}

// toSpec is the translation of one create request.
func (s *server) toSpec(name string, cfg *containertypes.Config, hc *containertypes.HostConfig, nc *networktypes.NetworkingConfig) (core.ContainerSpec, error) {
	if err := refuseUnsupported(cfg, hc); err != nil {
		return core.ContainerSpec{}, err
	}
	spec := core.ContainerSpec{
		LogConfiguration:    dockerLogConfig(hc.LogConfig),
		Name:                name,
		Image:               cfg.Image,
		RawImageName:        cfg.Image,
		Entrypoint:          cfg.Entrypoint,
		Command:             cfg.Cmd,
		Terminal:            cfg.Tty,
		Stdin:               cfg.OpenStdin,
		Labels:              cfg.Labels,
		Hostname:            cfg.Hostname,
		Domainname:          cfg.Domainname,
		WorkDir:             cfg.WorkingDir,
		User:                cfg.User,
		Annotations:         hc.Annotations,
		Remove:              hc.AutoRemove,
		Groups:              hc.GroupAdd,
		VolumesFrom:         hc.VolumesFrom,
		Privileged:          hc.Privileged,
		CapAdd:              hc.CapAdd,
		CapDrop:             hc.CapDrop,
		ReadOnly:            hc.ReadonlyRootfs,
		DNSServers:          hc.DNS,
		DNSSearch:           hc.DNSSearch,
		DNSOptions:          hc.DNSOptions,
		HostAdd:             hc.ExtraHosts,
		Sysctl:              hc.Sysctls,
		OCIRuntime:          hc.Runtime,
		PublishExposedPorts: hc.PublishAllPorts,
		// dockerd adds no /etc/passwd entry for a user the image lacks.
		ManagePassword: new(bool),
		DockerGroups:   true,
		DockerEnv:      true,
	}
	if len(cfg.Env) > 0 {
		spec.Env = map[string]string{}
		for _, kv := range cfg.Env {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				// "NAME" alone unsets NAME: the client found no value for it.
				continue
			}
			spec.Env[k] = v
		}
	}
	if cfg.StopSignal != "" {
		sig, err := parseSignal(cfg.StopSignal)
		if err != nil {
			return spec, core.InvalidArgument("StopSignal", err)
		}
		n := int(sig)
		spec.StopSignal = &n
	}
	if cfg.StopTimeout != nil {
		if *cfg.StopTimeout < 0 {
			return spec, core.InvalidArgument("StopTimeout", errors.New("must not be negative"))
		}
		t := uint(*cfg.StopTimeout)
		spec.StopTimeout = &t
	}
	if hc.Init != nil {
		spec.Init = *hc.Init
	}
	if hc.OomScoreAdj != 0 {
		v := hc.OomScoreAdj
		spec.OOMScoreAdj = &v
	}
	if hc.ShmSize > 0 {
		v := hc.ShmSize
		spec.ShmSize = &v
	}
	if hc.MaskedPaths != nil && len(hc.MaskedPaths) == 0 && hc.ReadonlyPaths != nil && len(hc.ReadonlyPaths) == 0 {
		// The docker CLI's --security-opt systempaths=unconfined.
		spec.Unmask = append(spec.Unmask, "ALL")
	}
	for _, opt := range hc.SecurityOpt {
		key, value, _ := strings.Cut(opt, "=")
		if k, v, ok := strings.Cut(opt, ":"); ok && !strings.Contains(k, "=") {
			key, value = k, v
		}
		switch {
		case opt == "no-new-privileges" || (key == "no-new-privileges" && value == "true"):
			spec.NoNewPrivs = true
		case key == "no-new-privileges" && value == "false":
		case key == "seccomp" && strings.HasPrefix(strings.TrimSpace(value), "{"):
			// The docker CLI reads a profile file itself and sends its text.
			spec.SeccompProfileText = value
		case key == "seccomp" && value != "":
			spec.SeccompProfilePath = value
		case key == "apparmor" && value != "":
			spec.ApparmorProfile = value
		// The engine applies no SELinux label: this asks for what it does.
		case opt == "label=disable" || opt == "label:disable":
		default:
			return spec, core.InvalidArgument("HostConfig.SecurityOpt", fmt.Errorf("%q is not supported", opt))
		}
	}
	switch mode := string(hc.PidMode); {
	case mode == "", mode == "private":
	case mode == "host":
		spec.PidNS = core.Namespace{NSMode: "host"}
	case strings.HasPrefix(mode, "container:") && len(mode) > len("container:"):
		spec.PidNS = core.Namespace{NSMode: core.NSContainer, Value: strings.TrimPrefix(mode, "container:")}
	default:
		return spec, core.InvalidArgument("HostConfig.PidMode", fmt.Errorf("%q is not supported (private, host or container:NAME)", hc.PidMode))
	}
	// Without a mode the engine's default is Docker's: private on the
	// unified hierarchy, the host's on v1.
	if hc.CgroupnsMode != "" {
		spec.CgroupNS = core.Namespace{NSMode: string(hc.CgroupnsMode)}
	}
	// Docker's default IPC mode is private: only a container made
	// shareable can be joined (container:NAME).
	switch mode := string(hc.IpcMode); {
	case mode == "":
		spec.IpcNS = core.Namespace{NSMode: core.IPCNSPrivate}
	case mode == core.IPCNSPrivate, mode == core.IPCNSShareable, mode == core.NSHost, mode == core.IPCNSNone:
		spec.IpcNS = core.Namespace{NSMode: mode}
	case strings.HasPrefix(mode, "container:") && len(mode) > len("container:"):
		spec.IpcNS = core.Namespace{NSMode: core.IPCNSContainer, Value: strings.TrimPrefix(mode, "container:")}
	default:
		return spec, core.InvalidArgument("HostConfig.IpcMode", fmt.Errorf("%q is not supported (private, shareable, none, host, container:NAME)", mode))
	}
	if m := spec.IpcNS.NSMode; spec.ShmSize == nil && (m == core.IPCNSPrivate || m == core.IPCNSShareable) {
		// dockerd's default /dev/shm is 64 MiB; Podman's (the engine's
		// own default) 64000 KiB.
		v := int64(dockerShmSize)
		spec.ShmSize = &v
	}
	switch mode := string(hc.UTSMode); mode {
	case "":
	case core.NSHost:
		spec.UtsNS = core.Namespace{NSMode: mode}
	default:
		return spec, core.InvalidArgument("HostConfig.UTSMode", fmt.Errorf("%q is not supported (host)", mode))
	}
	if err := s.restartPolicy(&spec, hc.RestartPolicy); err != nil {
		return spec, err
	}
	if err := healthConfig(&spec, cfg.Healthcheck); err != nil {
		return spec, err
	}
	if err := deviceRequests(&spec, hc.DeviceRequests); err != nil {
		return spec, err
	}
	if err := deviceCgroupRules(&spec, hc.DeviceCgroupRules); err != nil {
		return spec, err
	}
	if err := resources(&spec, &hc.Resources); err != nil {
		return spec, err
	}
	spec.DockerBinds = slices.Clone(hc.Binds)
	if len(hc.Mounts) > 0 {
		raw, err := json.Marshal(hc.Mounts)
		if err != nil {
			return spec, err
		}
		spec.DockerMounts = raw
	}
	if err := storageMounts(&spec, cfg, hc); err != nil {
		return spec, err
	}
	if err := s.networking(&spec, cfg, hc, nc); err != nil {
		return spec, err
	}
	return spec, nil
}

// dockerShmSize is the size of a container's /dev/shm when a Docker
// client asks for none (dockerd's DefaultShmSize).
const dockerShmSize = 64 << 20

// refuseUnsupported names the first option set in the request that the
// engine has no way to honour.
func refuseUnsupported(cfg *containertypes.Config, hc *containertypes.HostConfig) error {
	bad := func(field, why string) error {
		return core.InvalidArgument(field, errors.New(why))
	}
	var logErr error
	if hc.LogConfig.Type != core.LogDriverJournald {
		_, logErr = fileLogSize(hc.LogConfig.Config)
	}
	switch {
	case cfg.MacAddress != "":
		return bad("Config.MacAddress", "set the MAC address per network (EndpointSettings.MacAddress)")
	case hc.VolumeDriver != "" && hc.VolumeDriver != "local":
		return bad("HostConfig.VolumeDriver", fmt.Sprintf("%q: only the local volume driver exists", hc.VolumeDriver))
	case hc.UsernsMode != "" && hc.UsernsMode != "host":
		return bad("HostConfig.UsernsMode", fmt.Sprintf("%q is not supported (user namespaces)", hc.UsernsMode))
	case hc.CgroupnsMode != "" && hc.CgroupnsMode != "host" && hc.CgroupnsMode != "private":
		return bad("HostConfig.CgroupnsMode", fmt.Sprintf("%q is not supported (host or private)", hc.CgroupnsMode))
	case hc.Cgroup != "":
		return bad("HostConfig.Cgroup", "joining another cgroup is not supported")
	case len(hc.StorageOpt) > 0:
		return bad("HostConfig.StorageOpt", "storage options are not supported")
	case hc.Isolation != "" && hc.Isolation != "default":
		return bad("HostConfig.Isolation", fmt.Sprintf("%q is not supported", hc.Isolation))
	case len(hc.MaskedPaths) > 0:
		return bad("HostConfig.MaskedPaths", "custom masked paths are not supported")
	case len(hc.ReadonlyPaths) > 0:
		return bad("HostConfig.ReadonlyPaths", "custom read-only paths are not supported")
	case hc.LogConfig.Type == core.LogDriverNone && len(hc.LogConfig.Config) > 0:
		return bad("HostConfig.LogConfig.Config", "the none log driver takes no options")
	case hc.LogConfig.Type != "" && hc.LogConfig.Type != "json-file" && hc.LogConfig.Type != "k8s-file" && hc.LogConfig.Type != "local" && hc.LogConfig.Type != core.LogDriverJournald && hc.LogConfig.Type != core.LogDriverNone:
		return bad("HostConfig.LogConfig.Type", fmt.Sprintf("%q is not supported (the engine keeps a log file per container, sends it to journald, or keeps none)", hc.LogConfig.Type))
	case hc.LogConfig.Type == core.LogDriverJournald && (len(hc.LogConfig.Config) > 1 || len(hc.LogConfig.Config) == 1 && hc.LogConfig.Config["tag"] == ""):
		return bad("HostConfig.LogConfig.Config", "journald takes only the option tag")
	case logErr != nil:
		return bad("HostConfig.LogConfig.Config", logErr.Error())
	case hc.CgroupParent != "":
		return bad("HostConfig.CgroupParent", "a cgroup parent is not supported")
	case len(hc.BlkioWeightDevice) > 0:
		return bad("HostConfig.BlkioWeightDevice", "per-device block IO weights are not supported")
	case hc.CPURealtimePeriod != 0 || hc.CPURealtimeRuntime != 0:
		return bad("HostConfig.CpuRealtime", "real-time CPU scheduling is not supported")
	case hc.KernelMemory != 0 || hc.KernelMemoryTCP != 0:
		return bad("HostConfig.KernelMemory", "kernel memory limits are not supported")
	case hc.CPUCount != 0 || hc.CPUPercent != 0 || hc.IOMaximumIOps != 0 || hc.IOMaximumBandwidth != 0:
		return bad("HostConfig.CpuCount", "Windows resource options are not supported")
	}
	return nil
}

// restartPolicy maps Docker's restart policy.
func (s *server) restartPolicy(spec *core.ContainerSpec, p containertypes.RestartPolicy) error {
	name := string(p.Name)
	switch name {
	case "", "no":
		if p.MaximumRetryCount != 0 {
			return core.InvalidArgument("HostConfig.RestartPolicy", errors.New("maximum retry count cannot be used with restart policy 'no'"))
		}
		return nil
	case "always", "unless-stopped", "on-failure":
	default:
		return core.InvalidArgument("HostConfig.RestartPolicy", fmt.Errorf("invalid restart policy '%s'", name))
	}
	if p.MaximumRetryCount < 0 {
		return core.InvalidArgument("HostConfig.RestartPolicy", errors.New("maximum retry count cannot be negative"))
	}
	if p.MaximumRetryCount > 0 {
		if name != "on-failure" {
			return core.InvalidArgument("HostConfig.RestartPolicy", fmt.Errorf("maximum retry count cannot be used with restart policy '%s'", name))
		}
		n := uint(p.MaximumRetryCount)
		spec.RestartTries = &n
	}
	if spec.Remove {
		return core.InvalidArgument("HostConfig.RestartPolicy", errors.New("can't create 'AutoRemove' container with restart policy"))
	}
	spec.RestartPolicy = name
	return nil
}

// healthConfig maps Docker's healthcheck (same shape as the engine's).
func healthConfig(spec *core.ContainerSpec, hc *containertypes.HealthConfig) error {
	if hc == nil {
		return nil
	}
	if hc.StartInterval != 0 {
		return core.InvalidArgument("Healthcheck.StartInterval", errors.New("a start interval is not supported"))
	}
	spec.HealthConfig = &core.HealthConfig{
		Test: hc.Test, Interval: hc.Interval, Timeout: hc.Timeout, StartPeriod: hc.StartPeriod, Retries: hc.Retries,
	}
	return nil
}

// minMemory is the smallest memory limit dockerd takes (6 MiB).
const minMemory = 6 << 20

// resources maps Docker's resource limits to OCI's.
func resources(spec *core.ContainerSpec, res *containertypes.Resources) error {
	var lr specs.LinuxResources
	set := false
	mem := specs.LinuxMemory{}
	if res.Memory != 0 {
		if res.Memory < minMemory {
			return core.InvalidArgument("HostConfig.Memory", errors.New("Minimum memory limit allowed is 6MB"))
		}
		v := res.Memory
		mem.Limit, set = &v, true
	}
	if res.MemoryReservation != 0 {
		v := res.MemoryReservation
		mem.Reservation, set = &v, true
	}
	switch {
	case res.MemorySwap != 0:
		v := res.MemorySwap
		mem.Swap, set = &v, true
	case res.Memory > 0:
		// dockerd's default: as much swap as memory (memory+swap twice the
		// memory limit), as Podman's clients send it too.
		v := 2 * res.Memory
		mem.Swap = &v
	}
	if res.MemorySwappiness != nil && *res.MemorySwappiness >= 0 {
		v := uint64(*res.MemorySwappiness)
		mem.Swappiness, set = &v, true
	}
	if res.OomKillDisable != nil && *res.OomKillDisable {
		v := true
		mem.DisableOOMKiller, set = &v, true
	}
	if set {
		lr.Memory = &mem
	}
	cpu := specs.LinuxCPU{}
	cpuSet := false
	if res.CPUShares < 0 {
		return core.InvalidArgument("HostConfig.CpuShares", fmt.Errorf("invalid CPU shares (%d): must not be negative", res.CPUShares))
	}
	if res.CPUShares != 0 {
		v := uint64(res.CPUShares)
		cpu.Shares, cpuSet = &v, true
	}
	if n := int64(goruntime.NumCPU()); res.NanoCPUs < 0 || res.NanoCPUs > n*1e9 {
		return core.InvalidArgument("HostConfig.NanoCpus", fmt.Errorf("Range of CPUs is from 0.01 to %d.00, as there are only %d CPUs available", n, n))
	}
	if res.NanoCPUs != 0 {
		if res.CPUQuota != 0 || res.CPUPeriod != 0 {
			return core.InvalidArgument("HostConfig.NanoCpus", errors.New("conflicting options: Nano CPUs and CPU Period/Quota cannot both be set"))
		}
		period := uint64(100000)
		quota := res.NanoCPUs * int64(period) / 1e9
		cpu.Period, cpu.Quota, cpuSet = &period, &quota, true
	}
	if res.CPUPeriod != 0 {
		v := uint64(res.CPUPeriod)
		cpu.Period, cpuSet = &v, true
	}
	if res.CPUQuota != 0 {
		v := res.CPUQuota
		cpu.Quota, cpuSet = &v, true
	}
	if res.CpusetCpus != "" {
		cpu.Cpus, cpuSet = res.CpusetCpus, true
	}
	if res.CpusetMems != "" {
		cpu.Mems, cpuSet = res.CpusetMems, true
	}
	if cpuSet {
		lr.CPU, set = &cpu, true
	}
	if res.PidsLimit != nil && *res.PidsLimit > 0 {
		limit := *res.PidsLimit
		lr.Pids, set = &specs.LinuxPids{Limit: &limit}, true
	}
	if res.BlkioWeight != 0 {
		v := res.BlkioWeight
		lr.BlockIO, set = &specs.LinuxBlockIO{Weight: &v}, true
	}
	// Per-device throttles go by path, as podman sends them; creation
	// resolves the device numbers.
	for _, t := range []struct {
		from []*blkiodev.ThrottleDevice
		to   *map[string]specs.LinuxThrottleDevice
	}{
		{res.BlkioDeviceReadBps, &spec.ThrottleReadBpsDevice}, {res.BlkioDeviceWriteBps, &spec.ThrottleWriteBpsDevice},
		{res.BlkioDeviceReadIOps, &spec.ThrottleReadIOPSDevice}, {res.BlkioDeviceWriteIOps, &spec.ThrottleWriteIOPSDevice},
	} {
		for _, d := range t.from {
			if d == nil {
				continue
			}
			if *t.to == nil {
				*t.to = map[string]specs.LinuxThrottleDevice{}
			}
			(*t.to)[d.Path] = specs.LinuxThrottleDevice{Rate: d.Rate}
		}
	}
	if set {
		spec.Resources = &lr
	}
	for _, u := range res.Ulimits {
		if u == nil {
			continue
		}
		spec.Rlimits = append(spec.Rlimits, rlimit.Rlimit{Type: "RLIMIT_" + strings.ToUpper(u.Name), Hard: ulimitValue(u.Hard), Soft: ulimitValue(u.Soft)})
	}
	for _, d := range res.Devices {
		if core.IsCDIDevice(d.PathOnHost) {
			// docker run --device vendor.com/class=name (a client that
			// does not know CDI sends it as a path, in both places).
			if d.PathInContainer != "" && d.PathInContainer != d.PathOnHost {
				return core.InvalidArgument("HostConfig.Devices", fmt.Errorf("CDI device %q takes no path in the container (%q)", d.PathOnHost, d.PathInContainer))
			}
			spec.Devices = append(spec.Devices, specs.LinuxDevice{Path: d.PathOnHost})
			continue
		}
		path := d.PathOnHost
		if d.PathInContainer != "" {
			path += ":" + d.PathInContainer
		}
		if d.CgroupPermissions != "" {
			path += ":" + d.CgroupPermissions
		}
		spec.Devices = append(spec.Devices, specs.LinuxDevice{Path: path})
	}
	return nil
}

// ulimitValue reads Docker's -1 as unlimited.
func ulimitValue(v int64) uint64 {
	if v < 0 {
		return ^uint64(0)
	}
	return uint64(v)
}

// storageMounts maps Binds, Mounts, Tmpfs and the anonymous Volumes.
func storageMounts(spec *core.ContainerSpec, cfg *containertypes.Config, hc *containertypes.HostConfig) error {
	taken := map[string]bool{}
	dest := func(field, d string) error {
		if !strings.HasPrefix(d, "/") {
			return core.InvalidArgument(field, fmt.Errorf("invalid mount config: destination %q is not an absolute path", d))
		}
		if taken[d] {
			return core.InvalidArgument(field, fmt.Errorf("duplicate mount point: %s", d))
		}
		taken[d] = true
		return nil
	}
	for _, b := range hc.Binds {
		parts := strings.Split(b, ":")
		if len(parts) < 2 || len(parts) > 3 || parts[0] == "" {
			return core.InvalidArgument("HostConfig.Binds", fmt.Errorf("invalid volume specification: '%s'", b))
		}
		src, dst := parts[0], parts[1]
		var opts []string
		ro := false
		if len(parts) == 3 {
			for _, o := range strings.Split(parts[2], ",") {
				switch o {
				case "ro":
					ro = true
				case "rw", "z", "Z", "":
				case "nocopy", "rprivate", "private", "rshared", "shared", "rslave", "slave":
					opts = append(opts, o)
				default:
					return core.InvalidArgument("HostConfig.Binds", fmt.Errorf("invalid mode: %s", o))
				}
			}
		}
		if err := dest("HostConfig.Binds", dst); err != nil {
			return err
		}
		if ro {
			opts = append(opts, "ro")
		}
		if strings.HasPrefix(src, "/") {
			spec.Mounts = append(spec.Mounts, specs.Mount{Type: "bind", Source: src, Destination: dst, Options: append([]string{"rbind"}, opts...)})
		} else {
			spec.Volumes = append(spec.Volumes, core.NamedVolume{Name: src, Dest: dst, Options: opts})
		}
	}
	for _, m := range hc.Mounts {
		if err := dest("HostConfig.Mounts", m.Target); err != nil {
			return err
		}
		var opts []string
		if m.ReadOnly {
			opts = append(opts, "ro")
		}
		switch m.Type {
		case mount.TypeBind:
			if !strings.HasPrefix(m.Source, "/") {
				return core.InvalidArgument("HostConfig.Mounts", fmt.Errorf("invalid mount config for type \"bind\": invalid mount path: '%s' mount path must be absolute", m.Source))
			}
			bind := "rbind"
			if bo := m.BindOptions; bo != nil {
				if bo.Propagation != "" {
					opts = append(opts, string(bo.Propagation))
				}
				// bind-nonrecursive binds the source alone, without the
				// mounts below it.
				if bo.NonRecursive {
					bind = "bind"
				}
				switch {
				case bo.CreateMountpoint:
					return core.InvalidArgument("HostConfig.Mounts", fmt.Errorf("bind-create-src is not supported: create %s first", m.Source))
				case bo.ReadOnlyForceRecursive:
					return core.InvalidArgument("HostConfig.Mounts", errors.New("bind-recursive=readonly is not supported: runc 1.1 makes only the top mount read-only"))
				}
			}
			spec.Mounts = append(spec.Mounts, specs.Mount{Type: "bind", Source: m.Source, Destination: m.Target, Options: append([]string{bind}, opts...)})
		case mount.TypeVolume:
			vo := m.VolumeOptions
			if vo == nil {
				vo = &mount.VolumeOptions{}
			}
			if vo.DriverConfig != nil && vo.DriverConfig.Name != "" && vo.DriverConfig.Name != "local" {
				return core.InvalidArgument("HostConfig.Mounts", fmt.Errorf("volume driver %q is not supported: only local volumes", vo.DriverConfig.Name))
			}
			// volume-opt and volume-label would shape a volume the create
			// makes: make it first (docker volume create --opt, --label).
			if vo.DriverConfig != nil && len(vo.DriverConfig.Options) > 0 || len(vo.Labels) > 0 {
				return core.InvalidArgument("HostConfig.Mounts", errors.New("volume-opt and volume-label are not supported: create the volume first with docker volume create --opt/--label"))
			}
			// dockerd takes a subpath only relative and lexically inside.
			if vo.Subpath != "" && (m.Source == "" || !filepath.IsLocal(vo.Subpath)) {
				return core.InvalidArgument("HostConfig.Mounts", fmt.Errorf("invalid mount config for type \"volume\": subpath %q must be a relative path within a named volume", vo.Subpath))
			}
			if vo.NoCopy {
				opts = append(opts, "nocopy")
			}
			spec.Volumes = append(spec.Volumes, core.NamedVolume{Name: m.Source, Dest: m.Target, Options: opts, SubPath: vo.Subpath})
		case mount.TypeImage:
			iv := core.ImageVolume{Source: m.Source, Destination: m.Target}
			if m.ImageOptions != nil {
				iv.SubPath = m.ImageOptions.Subpath
			}
			// dockerd mounts images read-only.
			spec.ImageVolumes = append(spec.ImageVolumes, iv)
		case mount.TypeTmpfs:
			if m.TmpfsOptions != nil {
				if m.TmpfsOptions.SizeBytes > 0 {
					opts = append(opts, "size="+strconv.FormatInt(m.TmpfsOptions.SizeBytes, 10))
				}
				if m.TmpfsOptions.Mode != 0 {
					opts = append(opts, fmt.Sprintf("mode=%o", m.TmpfsOptions.Mode))
				}
			}
			spec.Mounts = append(spec.Mounts, specs.Mount{Type: "tmpfs", Source: "tmpfs", Destination: m.Target, Options: dockerTmpfs(opts)})
		default:
			return core.InvalidArgument("HostConfig.Mounts", fmt.Errorf("mount type %q is not supported", m.Type))
		}
	}
	tmpfs := make([]string, 0, len(hc.Tmpfs))
	for d := range hc.Tmpfs {
		tmpfs = append(tmpfs, d)
	}
	sort.Strings(tmpfs)
	for _, d := range tmpfs {
		if err := dest("HostConfig.Tmpfs", d); err != nil {
			return err
		}
		var opts []string
		if o := hc.Tmpfs[d]; o != "" {
			opts = strings.Split(o, ",")
		}
		spec.Mounts = append(spec.Mounts, specs.Mount{Type: "tmpfs", Source: "tmpfs", Destination: d, Options: dockerTmpfs(opts)})
	}
	anon := make([]string, 0, len(cfg.Volumes))
	for d := range cfg.Volumes {
		anon = append(anon, d)
	}
	sort.Strings(anon)
	for _, d := range anon {
		if taken[d] {
			continue
		}
		if err := dest("Config.Volumes", d); err != nil {
			return err
		}
		spec.Volumes = append(spec.Volumes, core.NamedVolume{Dest: d, IsAnonymous: true})
	}
	return nil
}

// networking maps the network mode, the endpoints and the ports.
func (s *server) networking(spec *core.ContainerSpec, cfg *containertypes.Config, hc *containertypes.HostConfig, nc *networktypes.NetworkingConfig) error {
	mode := string(hc.NetworkMode)
	if cfg.NetworkDisabled {
		mode = "none"
	}
	var endpoints map[string]*networktypes.EndpointSettings
	if nc != nil {
		endpoints = nc.EndpointsConfig
	}
	switch {
	case mode == "host":
		spec.NetNS = core.Namespace{NSMode: core.NetNSHost}
	case mode == "none":
		spec.NetNS = core.Namespace{NSMode: core.NetNSNone}
	case strings.HasPrefix(mode, "container:"):
		spec.NetNS = core.Namespace{NSMode: core.NetNSContainer, Value: strings.TrimPrefix(mode, "container:")}
	default:
		spec.NetNS = core.Namespace{NSMode: core.NetNSBridge}
		spec.Networks = map[string]core.PerNetworkOptions{}
		primary := mode
		if mode == "" || mode == "default" || mode == "bridge" {
			primary = s.cfg.DefaultNetwork
		}
		spec.Networks[primary] = core.PerNetworkOptions{}
		for name, ep := range endpoints {
			engineName := s.engineNetwork(name)
			opts, err := endpointOptions("NetworkingConfig.EndpointsConfig.", ep)
			if err != nil {
				return err
			}
			spec.Links = addLinks(spec.Links, opts.Links)
			opts.Links = nil
			if ep != nil && ep.MacAddress != "" {
				mac, err := net.ParseMAC(ep.MacAddress)
				if err != nil {
					return core.InvalidArgument("NetworkingConfig.EndpointsConfig.MacAddress", err)
				}
				opts.StaticMAC = core.HardwareAddr(mac)
			}
			spec.Networks[engineName] = opts
		}
	}
	links, err := parseLinks("HostConfig.Links", hc.Links)
	if err != nil {
		return err
	}
	spec.Links = addLinks(spec.Links, links)
	if len(spec.Links) > 0 && spec.NetNS.NSMode != core.NetNSBridge {
		return core.InvalidArgument("HostConfig.Links", fmt.Errorf("links need a network of the container's own: network mode %q has none", mode))
	}
	if spec.NetNS.NSMode != core.NetNSBridge && len(endpoints) > 0 {
		for name := range endpoints {
			if name != mode && !(mode == "host" || mode == "none") {
				return core.InvalidArgument("NetworkingConfig", fmt.Errorf("network %q cannot be joined in network mode %q", name, mode))
			}
		}
	}
	if len(cfg.ExposedPorts) > 0 {
		spec.Expose = map[uint16]string{}
		for p := range cfg.ExposedPorts {
			port, proto := p.Int(), p.Proto()
			if port <= 0 || port > 65535 {
				return core.InvalidArgument("Config.ExposedPorts", fmt.Errorf("invalid port %q", string(p)))
			}
			spec.Expose[uint16(port)] = proto
		}
	}
	for p, bindings := range hc.PortBindings {
		start, end, err := p.Range()
		if err != nil || start <= 0 || end > 65535 {
			return core.InvalidArgument("HostConfig.PortBindings", fmt.Errorf("invalid port %q", string(p)))
		}
		if len(bindings) == 0 {
			bindings = append(bindings, nat.PortBinding{})
		}
		for _, b := range bindings {
			pm := core.PortMapping{HostIP: b.HostIP, ContainerPort: uint16(start), Protocol: p.Proto(), Range: uint16(end - start + 1)}
			if b.HostPort != "" {
				hs, he, err := parsePortRange(b.HostPort)
				if err != nil {
					return core.InvalidArgument("HostConfig.PortBindings", fmt.Errorf("invalid host port %q", b.HostPort))
				}
				if he != hs && he-hs != end-start {
					return core.InvalidArgument("HostConfig.PortBindings", fmt.Errorf("host port range %q does not match container range %q", b.HostPort, string(p)))
				}
				pm.HostPort = uint16(hs)
			}
			if pm.Range == 1 {
				pm.Range = 0
			}
			spec.PortMappings = append(spec.PortMappings, pm)
		}
	}
	if spec.NetNS.NSMode != core.NetNSBridge && len(spec.PortMappings) > 0 {
		spec.PortMappings = nil // Docker ignores published ports outside bridge mode.
	}
	return nil
}

// parsePortRange reads "8080" or "8080-8090".
func parsePortRange(v string) (int, int, error) {
	a, b, isRange := strings.Cut(v, "-")
	start, err := strconv.Atoi(a)
	if err != nil || start < 0 || start > 65535 {
		return 0, 0, errors.New("bad port")
	}
	if !isRange {
		return start, start, nil
	}
	end, err := strconv.Atoi(b)
	if err != nil || end < start || end > 65535 {
		return 0, 0, errors.New("bad port")
	}
	return start, end, nil
}

// parseSignal reads "SIGTERM", "TERM" or "15".
func parseSignal(v string) (syscall.Signal, error) {
	if n, err := strconv.Atoi(v); err == nil {
		if n < 1 || n > 64 {
			return 0, fmt.Errorf("invalid signal: %s", v)
		}
		return syscall.Signal(n), nil
	}
	name := strings.TrimPrefix(strings.ToUpper(v), "SIG")
	if sig, ok := signalNames[name]; ok {
		return sig, nil
	}
	return 0, fmt.Errorf("invalid signal: %s", v)
}

var signalNames = map[string]syscall.Signal{
	"ABRT": syscall.SIGABRT, "ALRM": syscall.SIGALRM, "BUS": syscall.SIGBUS, "CHLD": syscall.SIGCHLD,
	"CONT": syscall.SIGCONT, "FPE": syscall.SIGFPE, "HUP": syscall.SIGHUP, "ILL": syscall.SIGILL,
	"INT": syscall.SIGINT, "IO": syscall.SIGIO, "KILL": syscall.SIGKILL, "PIPE": syscall.SIGPIPE,
	"PROF": syscall.SIGPROF, "PWR": syscall.SIGPWR, "QUIT": syscall.SIGQUIT, "SEGV": syscall.SIGSEGV,
	"STOP": syscall.SIGSTOP, "SYS": syscall.SIGSYS, "TERM": syscall.SIGTERM, "TRAP": syscall.SIGTRAP,
	"TSTP": syscall.SIGTSTP, "TTIN": syscall.SIGTTIN, "TTOU": syscall.SIGTTOU, "URG": syscall.SIGURG,
	"USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "VTALRM": syscall.SIGVTALRM, "WINCH": syscall.SIGWINCH,
	"XCPU": syscall.SIGXCPU, "XFSZ": syscall.SIGXFSZ,
}

// signalName is the name Docker shows for a signal number.
func signalName(n int) string {
	for name, sig := range signalNames {
		if int(sig) == n {
			return "SIG" + name
		}
	}
	return strconv.Itoa(n)
}

// dockerLogConfig is the spec's log configuration for a Docker LogConfig:
// journald (with its tag) or, for any file driver, the engine's k8s-file
// with max-size as its size limit.
func dockerLogConfig(lc containertypes.LogConfig) *core.LogConfig {
	if lc.Type == core.LogDriverJournald {
		return &core.LogConfig{Driver: core.LogDriverJournald, Tag: lc.Config["tag"]}
	}
	if lc.Type == core.LogDriverNone {
		return &core.LogConfig{Driver: core.LogDriverNone}
	}
	if size, err := fileLogSize(lc.Config); err == nil && size > 0 {
		return &core.LogConfig{Driver: core.LogDriverK8sFile, Size: size}
	}
	return nil
}

// fileLogSize reads the options of Docker's file log drivers (json-file,
// local) that the engine honours: max-size (Docker's units: "10m" is 10 MiB),
// at which conmon starts the log over; max-file, a positive count, of which
// the engine keeps one file, within any such maximum; compress=false. Any
// other option, or compress=true, is an error naming it.
func fileLogSize(opts map[string]string) (int64, error) {
	var size int64
	for k, v := range opts {
		switch k {
		case "max-size":
			n, err := units.RAMInBytes(v)
			if err != nil || n <= 0 {
				return 0, fmt.Errorf("max-size %q is not a positive size", v)
			}
			size = n
		case "max-file":
			if n, err := strconv.Atoi(v); err != nil || n < 1 {
				return 0, fmt.Errorf("max-file %q is not a positive count", v)
			}
		case "compress":
			if on, err := strconv.ParseBool(v); err != nil || on {
				return 0, fmt.Errorf("compress=%s is not supported: the engine keeps one uncompressed log file", v)
			}
		default:
			return 0, fmt.Errorf("log option %q is not supported (max-size, max-file, compress=false)", k)
		}
	}
	return size, nil
}

// dockerTmpfsDefaults are the flags dockerd mounts a tmpfs with unless the
// request says otherwise (exec, suid, dev), each with its opposite.
var dockerTmpfsDefaults = [][2]string{{"noexec", "exec"}, {"nosuid", "suid"}, {"nodev", "dev"}}

// dockerTmpfs is a tmpfs's options as dockerd completes them: noexec,
// nosuid and nodev unless the request chose the opposite, and an empty
// tmpfs (the engine's own default, Podman's, copies the image's content
// at the destination in: notmpcopyup unless the request asks for it).
func dockerTmpfs(opts []string) []string {
	out := make([]string, 0, len(opts)+4)
	for _, d := range dockerTmpfsDefaults {
		if !slices.Contains(opts, d[0]) && !slices.Contains(opts, d[1]) {
			out = append(out, d[0])
		}
	}
	out = append(out, opts...)
	if !slices.Contains(opts, "tmpcopyup") && !slices.Contains(opts, "notmpcopyup") {
		out = append(out, "notmpcopyup")
	}
	return out
}
