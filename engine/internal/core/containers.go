package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berth-project/berth/shared/rlimit"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// ContainerState is the lifecycle state of a container as the engine tracks it.
type ContainerState string

// Container states. StateConfigured is a container that exists only in the
// engine's database and storage (no OCI runtime instance yet); StateCreated
// one that the OCI runtime created and that waits to be started.
const (
	StateConfigured ContainerState = "configured"
	StateCreated    ContainerState = "created"
	StateRunning    ContainerState = "running"
	StatePaused     ContainerState = "paused"
	StateStopped    ContainerState = "stopped"
	StateExited     ContainerState = "exited"
	StateRemoving   ContainerState = "removing"
)

// String returns the state name clients expect: Podman calls a configured
// container "created" (Docker's word) and a runtime-created one "initialized".
func (s ContainerState) String() string {
	switch s {
	case StateConfigured:
		return "created"
	case StateCreated:
		return "initialized"
	}
	return string(s)
}

// Namespace is one namespace setting of the creation spec ({"nsmode": ..., "value": ...}).
type Namespace struct {
	NSMode string `json:"nsmode,omitempty"`
	Value  string `json:"value,omitempty"`
}

// Cgroup namespace modes (CgroupNS.NSMode) the engine supports.
const (
	CgroupNSHost      = "host"
	CgroupNSPrivate   = "private"
	CgroupNSContainer = "container"
	CgroupNSPath      = "path"
)

// Network namespace modes the engine supports.
const (
	NetNSNone    = "none"
	NetNSHost    = "host"
	NetNSPrivate = "private"
)

// ImageVolume is an image's file system mounted at Destination: read-only,
// or with ReadWrite an overlay whose changes last one run of the container;
// SubPath mounts only that directory of the image.
type ImageVolume struct {
	Source      string
	Destination string
	ReadWrite   bool   `json:",omitempty"`
	SubPath     string `json:"subPath,omitempty"`
}

// OverlayVolume is a host directory mounted through an overlay (podman
// run -v /src:/dst:O): the container's writes go to an upper layer, never
// to the source. Options are the mount's (O, upperdir=, workdir=).
type OverlayVolume struct {
	Destination string   `json:"destination"`
	Source      string   `json:"source,omitempty"`
	Options     []string `json:"options,omitempty"`
}

// FoldOverlayVolumes appends ovs to mounts as the engine keeps overlays:
// bind mounts with the O option (the option's checks are the container
// backend's). A source that is not an absolute path is a 400 naming
// FIELD[i].source.
func FoldOverlayVolumes(field string, ovs []OverlayVolume, mounts []specs.Mount) ([]specs.Mount, error) {
	for i, ov := range ovs {
		if !path.IsAbs(ov.Source) {
			return nil, InvalidArgument(fmt.Sprintf("%s[%d].source", field, i), fmt.Errorf("%q is not an absolute host path", ov.Source))
		}
		opts := slices.Clone(ov.Options)
		if !slices.Contains(opts, "O") {
			opts = append(opts, "O")
		}
		mounts = append(mounts, specs.Mount{Type: "bind", Source: ov.Source, Destination: ov.Destination, Options: append([]string{"rbind"}, opts...)})
	}
	return mounts, nil
}

// ArtifactVolume mounts the files of an artifact of the engine's store
// (Podman 5's --mount type=artifact,src=ARTIFACT,dst=PATH[,title=|digest=]
// [,name=]): each file read-only at PATH/NAME, or at PATH itself when the
// artifact has one file and PATH is no directory in the image. Title or
// Digest selects one file; Name renames the files (NAME, or NAME-i for
// several).
type ArtifactVolume struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
	Title       string `json:"title,omitempty"`
	Digest      string `json:"digest,omitempty"`
	Name        string `json:"name,omitempty"`
}

// ContainerLink is one legacy link: a container and the alias this
// container knows it by.
type ContainerLink struct {
	Container string `json:"container"`
	Alias     string `json:"alias"`
}

// ContainerSpec is the creation request: the subset of Podman's SpecGenerator
// JSON (what `podman --remote create` sends) that the engine understands.
// Every other member must hold its zero value or a default the engine
// honours; the HTTP layer refuses anything else with a 400 naming it.
// Known members are validated by Validate.
type ContainerSpec struct {
	Name  string `json:"name,omitempty"`
	Image string `json:"image"`
	// Rootfs makes a container without an image: its root is this host
	// directory (podman --rootfs PATH), or with RootfsOverlay an overlay
	// on it whose changes are discarded (PATH:O).
	Rootfs        string `json:"rootfs,omitempty"`
	RootfsOverlay bool   `json:"rootfs_overlay,omitempty"`
	RawImageName  string `json:"raw_image_name,omitempty"`
	// ImageVolumes mount images' file systems into the container (podman's
	// --mount type=image, Docker's type=image). Recorded by image ID.
	ImageVolumes []ImageVolume `json:"image_volumes,omitempty"`
	// OverlayVolumes become bind mounts with the O option at create.
	OverlayVolumes []OverlayVolume `json:"overlay_volumes,omitempty"`
	// ArtifactVolumes are artifacts' files mounted read-only.
	ArtifactVolumes []ArtifactVolume `json:"artifact_volumes,omitempty"`
	// DependencyContainers are containers this one requires (podman's
	// --requires): each is started before it, and none can be removed
	// before it. Recorded by ID.
	DependencyContainers []string `json:"dependencyContainers,omitempty"`
	// Links are Docker's legacy links (HostConfig.Links and an endpoint's
	// Links; Compose v1 sends them for every service): the linked
	// container's address on a network the two share stands in this
	// container's /etc/hosts under the alias, the linked container's
	// hostname and its name, as dockerd's default bridge writes them.
	// Recorded by ID.
	Links []ContainerLink `json:"links,omitempty"`
	// ImageOS, ImageArch and ImageVariant name the platform the image must
	// be for (podman's --os, --arch, --variant and --platform; Docker's
	// platform query): a local image for another platform is not the one
	// the request names.
	ImageOS      string            `json:"image_os,omitempty"`
	ImageArch    string            `json:"image_arch,omitempty"`
	ImageVariant string            `json:"image_variant,omitempty"`
	Entrypoint   []string          `json:"entrypoint,omitempty"`
	Command      []string          `json:"command,omitempty"`
	Env          map[string]string `json:"env,omitempty"`
	// EnvMerge ("NAME=value", Podman's --env-merge) sets variables whose
	// values may use the image's and the engine's defaults ($NAME, ${NAME});
	// UnsetEnv drops default variables by name, UnsetEnvAll all of them
	// (the image's and PATH, TERM, container; HOSTNAME and HOME stay). The
	// request's own env is applied after all three.
	EnvMerge      []string          `json:"envmerge,omitempty"`
	UnsetEnv      []string          `json:"unsetenv,omitempty"`
	UnsetEnvAll   bool              `json:"unsetenvall,omitempty"`
	Terminal      bool              `json:"terminal,omitempty"`
	Stdin         bool              `json:"stdin,omitempty"`
	Labels        map[string]string `json:"labels,omitempty"`
	Annotations   map[string]string `json:"annotations,omitempty"`
	StopSignal    *int              `json:"stop_signal,omitempty"`
	StopTimeout   *uint             `json:"stop_timeout,omitempty"`
	Timeout       uint              `json:"timeout,omitempty"`
	RestartPolicy string            `json:"restart_policy,omitempty"`
	RestartTries  *uint             `json:"restart_tries,omitempty"`
	OCIRuntime    string            `json:"oci_runtime,omitempty"`
	Remove        bool              `json:"remove,omitempty"`
	Hostname      string            `json:"hostname,omitempty"`
	Sysctl        map[string]string `json:"sysctl,omitempty"`
	CreateCommand []string          `json:"containerCreateCommand,omitempty"`
	WorkDir       string            `json:"work_dir,omitempty"`
	// Domainname is the container's NIS domain name (Docker's
	// Config.Domainname), set in its UTS namespace; its own address's
	// line in /etc/hosts names it as HOSTNAME.DOMAINNAME first.
	Domainname string `json:"domainname,omitempty"`
	User       string `json:"user,omitempty"`
	// ManagePassword (podman's --passwd, on unless false) adds /etc/passwd
	// and /etc/group entries for a numeric user the image lacks and for
	// HostUsers (--hostuser); PasswdEntry and GroupEntry are templates of
	// those lines (--passwd-entry, --group-entry).
	ManagePassword *bool `json:"manage_password,omitempty"`
	// DockerGroups gives the container's processes the supplementary
	// groups dockerd gives: the primary group and the groups /etc/group
	// lists the user in also without a user (root's), and an exec its
	// user's primary group and the container's Groups too. Docker's API
	// sets it; Podman's rule adds them only for a container with a user,
	// and to an exec neither.
	DockerGroups bool `json:"docker_groups,omitempty"`
	// DockerBinds and DockerMounts are HostConfig.Binds and .Mounts (its
	// JSON) as a Docker create sent them: the Docker API shows them back
	// as dockerd does, where the engine's view merges both.
	DockerBinds  []string        `json:"docker_binds,omitempty"`
	DockerMounts json.RawMessage `json:"docker_mounts,omitempty"`
	// DockerEnv gives the container dockerd's default environment (PATH,
	// and TERM=xterm with a terminal) instead of Podman's (PATH,
	// TERM=xterm and container=podman). Docker's API sets it.
	DockerEnv   bool          `json:"docker_env,omitempty"`
	PasswdEntry string        `json:"passwd_entry,omitempty"`
	GroupEntry  string        `json:"group_entry,omitempty"`
	HostUsers   []string      `json:"hostusers,omitempty"`
	Groups      []string      `json:"groups,omitempty"`
	Mounts      []specs.Mount `json:"mounts,omitempty"`
	// Volumes are the named volumes to mount; an empty Name creates an
	// anonymous volume. ImageVolumeMode says what to do with the image's
	// volumes: "anonymous" (or "bind", or empty) mounts an anonymous volume
	// on each, "tmpfs" a tmpfs, "ignore" nothing.
	Volumes         []NamedVolume `json:"volumes,omitempty"`
	ImageVolumeMode string        `json:"image_volume_mode,omitempty"`
	// VolumesFrom names containers ("name[:ro|rw|z,...]") whose volumes and
	// bind mounts this container mounts too.
	VolumesFrom []string `json:"volumes_from,omitempty"`
	Privileged  bool     `json:"privileged,omitempty"`
	CapAdd      []string `json:"cap_add,omitempty"`
	CapDrop     []string `json:"cap_drop,omitempty"`
	ReadOnly    bool     `json:"read_only_filesystem,omitempty"`
	// ReadWriteTmpfs (Podman 5 and 6: --read-only with --read-only-tmpfs,
	// the default) mounts read-write tmpfs at /tmp, /var/tmp and /run of
	// a read-only container where nothing else is mounted; false with
	// ReadOnly makes /dev read-only too.
	ReadWriteTmpfs *bool `json:"read_write_tmpfs,omitempty"`
	NoNewPrivs     bool  `json:"no_new_privileges,omitempty"`
	// SeccompPolicy is Podman's: "default" (SeccompProfilePath, else the
	// engine's default profile) or "image" (the profile in the image's
	// io.containers.seccomp.profile label, where it has one).
	SeccompPolicy string `json:"seccomp_policy,omitempty"`
	// SeccompProfilePath is "" (the default profile), "unconfined" (no
	// filter) or the absolute path of a profile file, read at create.
	SeccompProfilePath string `json:"seccomp_profile_path,omitempty"`
	// SeccompProfileText is a profile given by its text (the docker CLI
	// sends the file's content); it is not part of libpod's wire format.
	SeccompProfileText string `json:"-"`
	// UserNS is the user namespace: "" or "host" (the host's), "auto"
	// (Value "size=N": a range of the engine's subordinate IDs of its own),
	// "private" (the mappings of IDMappings).
	UserNS     Namespace         `json:"userns,omitempty"`
	IDMappings *IDMappingOptions `json:"idmappings,omitempty"`
	// ApparmorProfile is the AppArmor profile: "" (the engine's default
	// where the host enforces AppArmor), "unconfined" or a loaded profile.
	ApparmorProfile string `json:"apparmor_profile,omitempty"`
	// Mask and Unmask add paths to, or take paths from, the kernel paths
	// masked in the container (Unmask "ALL": every default one).
	Mask    []string  `json:"mask,omitempty"`
	Unmask  []string  `json:"unmask,omitempty"`
	Umask   string    `json:"umask,omitempty"`
	ShmSize *int64    `json:"shm_size,omitempty"`
	NetNS   Namespace `json:"netns,omitempty"`
	PidNS   Namespace `json:"pidns,omitempty"`
	// IpcNS is the IPC namespace: shareable (the default, as Podman's: one
	// of its own, with a /dev/shm tmpfs mounted on the host side, which
	// other containers can join), private (its own, its /dev/shm inside
	// it alone: Docker's default), none (its own, with no /dev/shm), host
	// (the host's, with the host's /dev/shm and /dev/mqueue) or container
	// (Value: that shareable container's namespace and /dev/shm).
	IpcNS Namespace `json:"ipcns,omitempty"`
	// UtsNS is the UTS namespace: private (the default) or host (the host's
	// hostname; the container sets none of its own).
	UtsNS Namespace `json:"utsns,omitempty"`
	// Timezone is the container's /etc/localtime (Podman's --tz): a zone
	// name of the host's tzdata ("Europe/Berlin") or "local" (the host's own
	// /etc/localtime); "" leaves the image's.
	Timezone string `json:"timezone,omitempty"`
	// CgroupNS is the cgroup namespace: host, private, container (Value
	// names the container whose namespace it joins) or path (Value: an
	// nsfs path). Creation fills in the host's default: private on the
	// unified hierarchy, host on v1, as Podman.
	CgroupNS Namespace `json:"cgroupns,omitempty"`
	// CgroupParent is the container's cgroup parent (podman
	// --cgroup-parent): a cgroupfs path under the cgroupfs manager, a slice
	// name (x.slice) under systemd; empty takes the engine's or the pod's.
	CgroupParent string `json:"cgroup_parent,omitempty"`
	// CgroupsMode is podman's --cgroups: enabled (default), disabled
	// (CgroupsDisabled), no-conmon or split (see docs/engine/hosts.md#cgroups).
	CgroupsMode string   `json:"cgroups_mode,omitempty"`
	DNSServers  []string `json:"dns_server,omitempty"`
	DNSSearch   []string `json:"dns_search,omitempty"`
	DNSOptions  []string `json:"dns_option,omitempty"`
	HostAdd     []string `json:"hostadd,omitempty"`
	// UseImageHosts and UseImageResolvConf leave the image's /etc/hosts or
	// /etc/resolv.conf in place of the generated ones (Podman's --no-hosts,
	// --dns none).
	UseImageHosts bool `json:"use_image_hosts,omitempty"`
	// BaseHostsFile (Podman 5 and 6's --hosts-file) is what the generated
	// /etc/hosts starts from: "" or "none" nothing but the engine's own
	// entries, "image" the image's /etc/hosts, an absolute path a file
	// of the engine's host, read at each start.
	BaseHostsFile      string                `json:"base_hosts_file,omitempty"`
	UseImageResolvConf bool                  `json:"use_image_resolve_conf,omitempty"`
	Resources          *specs.LinuxResources `json:"resource_limits,omitempty"`
	// ThrottleReadBpsDevice and its three siblings are Podman's
	// --device-read-bps, --device-write-bps, --device-read-iops and
	// --device-write-iops (Docker's BlkioDevice*): rates keyed by a block
	// device's path on the host. Creation adds them to
	// resource_limits.blockIO by device number (ResolveThrottleDevices).
	ThrottleReadBpsDevice   map[string]specs.LinuxThrottleDevice `json:"throttleReadBpsDevice,omitempty"`
	ThrottleWriteBpsDevice  map[string]specs.LinuxThrottleDevice `json:"throttleWriteBpsDevice,omitempty"`
	ThrottleReadIOPSDevice  map[string]specs.LinuxThrottleDevice `json:"throttleReadIOPSDevice,omitempty"`
	ThrottleWriteIOPSDevice map[string]specs.LinuxThrottleDevice `json:"throttleWriteIOPSDevice,omitempty"`
	Rlimits                 []rlimit.Rlimit                      `json:"r_limits,omitempty"`
	OOMScoreAdj             *int                                 `json:"oom_score_adj,omitempty"`
	HealthConfig            *HealthConfig                        `json:"healthconfig,omitempty"`
	// HealthCheckOnFailureAction is what the engine does when the
	// healthcheck makes the container unhealthy (Podman's numbers).
	HealthCheckOnFailureAction HealthOnFailure `json:"health_check_on_failure_action,omitempty"`
	// StartupHealthConfig is a check run instead of the healthcheck from
	// each start until it passes (Podman 5's startup healthcheck).
	StartupHealthConfig *StartupHealthConfig `json:"startupHealthConfig,omitempty"`
	// HealthLogDestination is where the healthcheck results are kept
	// (Podman 5's --health-log-destination): "local" or empty (the
	// container's state), "events_logger" (the state, and each
	// health_status event carries the newest result) or an existing
	// directory, where DIR/ID-healthcheck.log holds them as well.
	HealthLogDestination string `json:"healthLogDestination,omitempty"`
	// HealthMaxLogCount and HealthMaxLogSize bound the results kept and
	// each result's output (Podman 5's --health-max-log-count/-size;
	// unset: 5 and 500, 0: no bound).
	HealthMaxLogCount *uint  `json:"healthMaxLogCount,omitempty"`
	HealthMaxLogSize  *uint  `json:"healthMaxLogSize,omitempty"`
	CPUPeriod         uint64 `json:"cpu_period,omitempty"`
	CPUQuota          int64  `json:"cpu_quota,omitempty"`
	// Secrets are secrets mounted as read-only files; SecretEnv maps an
	// environment variable to the secret that is its value. At create the
	// engine rewrites both to refer to secrets by ID.
	Secrets   []SecretMount     `json:"secrets,omitempty"`
	SecretEnv map[string]string `json:"secret_env,omitempty"`
	// HTTPProxy passes the engine's proxy variables (http_proxy, https_proxy,
	// ftp_proxy, no_proxy, either case) to the container where not set.
	HTTPProxy bool `json:"httpproxy,omitempty"`
	// Init runs an init (catatonit, or the binary at InitPath) as PID 1.
	Init     bool   `json:"init,omitempty"`
	InitPath string `json:"init_path,omitempty"`
	// Pod is the pod (name or ID) the container joins: it shares the
	// namespaces the pod shares with its infra container.
	Pod string `json:"pod,omitempty"`
	// PodInfra marks the infra container of Pod; only the pods backend sets
	// it (it is not part of the wire format).
	PodInfra bool `json:"-"`
	// InitContainerType makes a pod member an init container: the pod's
	// start runs it to completion before the other members, at every start
	// ("always") or at the first only, after which it is removed ("once").
	InitContainerType string `json:"init_container_type,omitempty"`
	// Devices are host devices the container gets, each Path being
	// "source[:destination][:permissions]" (permissions of r, w, m) as
	// podman's --device sends it, or a CDI device ("vendor.com/class=name",
	// see IsCDIDevice) whose spec's edits the container gets.
	Devices []specs.LinuxDevice `json:"devices,omitempty"`
	// GPUs (Podman 5 and 6's --gpus: "all", or IDs) are the GPUs of the
	// first GPU vendor (GPUVendors) whose CDI specs the engine has, added
	// to Devices as VENDOR/gpu=ID at create.
	GPUs []string `json:"gpus,omitempty"`
	// DeviceCgroupRules are device cgroup rules added after the default
	// deny (podman --device-cgroup-rule 'c 1:3 rwm'; a nil number is *).
	DeviceCgroupRules []specs.LinuxDeviceCgroup `json:"device_cgroup_rule,omitempty"`

	// Networks are the networks a container in bridge mode joins (none:
	// the default network); CNINetworks is the older list of names.
	Networks map[string]PerNetworkOptions `json:"Networks,omitempty"`
	// NetworkOrder (Podman 6) lists the keys of Networks in the order
	// their interfaces are numbered (eth0, eth1 ...) where not named;
	// without it the order is the networks' names'.
	NetworkOrder []string `json:"networkOrder,omitempty"`
	CNINetworks  []string `json:"cni_networks,omitempty"`
	// PortMappings publish container ports on the host; with
	// PublishExposedPorts every port the image or Expose names is
	// published on a random host port too.
	PortMappings        []PortMapping       `json:"portmappings,omitempty"`
	PublishExposedPorts bool                `json:"publish_image_ports,omitempty"`
	Expose              map[uint16]string   `json:"expose,omitempty"`
	NetworkOptions      map[string][]string `json:"network_options,omitempty"`
	// LogConfiguration selects where conmon sends the container's output
	// (Podman's --log-driver, --log-opt tag=): nil is k8s-file.
	LogConfiguration *LogConfig `json:"log_configuration,omitempty"`
}

// Log drivers the engine offers: conmon writes a k8s-file log under the
// container's directory, or sends every line to the systemd journal
// (where journald runs).
const (
	LogDriverK8sFile  = "k8s-file"
	LogDriverJournald = "journald"
	// LogDriverNone keeps no log: attached clients still get the output.
	LogDriverNone = "none"
	// LogDriverJSONFile is Docker's name, which Podman accepts and writes
	// as k8s-file (LogDriver answers k8s-file for it).
	LogDriverJSONFile = "json-file"
)

// LogConfig is Podman's LogConfig of a SpecGenerator. Only the driver and,
// with journald, the tag (conmon's --log-tag: the entries' CONTAINER_TAG
// and SYSLOG_IDENTIFIER) take effect; podman's --log-opt tag=T arrives as
// the option "tag". A path, size or other option is refused.
type LogConfig struct {
	Driver  string            `json:"driver,omitempty"`
	Path    string            `json:"path,omitempty"`
	Size    int64             `json:"size,omitempty"`
	Tag     string            `json:"tag,omitempty"`
	Options map[string]string `json:"options,omitempty"`
}

// LogDriver is the container's log driver: LogDriverK8sFile unless the
// request chose journald.
func (s *ContainerSpec) LogDriver() string {
	if s.LogConfiguration != nil && s.LogConfiguration.Driver == LogDriverJSONFile {
		// Podman accepts Docker's name and writes k8s-file.
		return LogDriverK8sFile
	}
	if s.LogConfiguration != nil && s.LogConfiguration.Driver != "" {
		return s.LogConfiguration.Driver
	}
	return LogDriverK8sFile
}

// LogsReadable says whether the container keeps a log to read: one with
// the none driver answers ErrLogsNotKept.
func (c *Container) LogsReadable() error {
	if c.Spec.LogDriver() == LogDriverNone {
		// Podman's words.
		return fmt.Errorf("this container is using the 'none' log driver, cannot read logs: %w", ErrLogsNotKept)
	}
	return nil
}

// LogSizeMax is the size in bytes at which conmon starts the log file over
// (Podman's --log-opt max-size, Docker's max-size); 0 is no limit.
func (s *ContainerSpec) LogSizeMax() int64 {
	if s.LogConfiguration == nil {
		return 0
	}
	return s.LogConfiguration.Size
}

// LogTag is the journald tag the request set ("" for none).
func (s *ContainerSpec) LogTag() string {
	if s.LogConfiguration == nil {
		return ""
	}
	return s.LogConfiguration.tag()
}

func (lc *LogConfig) tag() string {
	if lc.Tag != "" {
		return lc.Tag
	}
	return lc.Options["tag"]
}

func (lc *LogConfig) validate() error {
	if lc == nil {
		return nil
	}
	switch lc.Driver {
	case "", LogDriverK8sFile, LogDriverJSONFile, LogDriverJournald, LogDriverNone:
	default:
		return InvalidArgument("log_configuration.driver", fmt.Errorf("log driver %q is not supported (k8s-file, json-file, journald, none)", lc.Driver))
	}
	for k := range lc.Options {
		if k != "tag" {
			return InvalidArgument("log_configuration.options", fmt.Errorf("log option %q is not supported (tag, with journald)", k))
		}
	}
	if lc.Path != "" {
		return InvalidArgument("log_configuration.path", errors.New("a log path is not supported (the log lives with the container)"))
	}
	if lc.Size < 0 {
		return InvalidArgument("log_configuration.size", fmt.Errorf("%d is negative", lc.Size))
	}
	if lc.Size > 0 && lc.Driver == LogDriverJournald {
		return InvalidArgument("log_configuration.size", errors.New("a log size limit needs the k8s-file log driver (journald keeps its own limits)"))
	}
	if lc.Size > 0 && lc.Driver == LogDriverNone {
		return InvalidArgument("log_configuration.size", errors.New("a log size limit needs the k8s-file log driver (none keeps no log)"))
	}
	tag := lc.tag()
	if tag != "" && lc.Driver != LogDriverJournald {
		return InvalidArgument("log_configuration.tag", errors.New("a log tag needs the journald log driver (conmon's k8s-file has none)"))
	}
	if strings.ContainsAny(tag, "\n\x00") {
		return InvalidArgument("log_configuration.tag", fmt.Errorf("%q holds a newline or NUL", tag))
	}
	return nil
}

// Container is the engine's record of one container. It is a snapshot: the
// fields are copied out of the engine and may be stale a moment later.
type Container struct {
	ID      string
	Name    string
	Created time.Time
	// Image is the image name as requested; ImageID the resolved image.
	Image   string
	ImageID string
	// Spec is the creation request after defaults were applied.
	Spec ContainerSpec
	// ImageConfig holds the parts of the image configuration the container was
	// built from (entrypoint, cmd, env, workdir, stop signal), which a later
	// init needs if the image is gone.
	ImageEntrypoint []string
	ImageCmd        []string
	ImageEnv        []string `json:",omitempty"`
	ImageWorkDir    string   `json:",omitempty"`
	ImageStopSignal string   `json:",omitempty"`
	// Path and Args are the process the container runs.
	Path string
	Args []string
	// Runtime is the OCI runtime binary name ("runc" or "crun").
	Runtime string
	// Bundle is the OCI bundle directory (config.json, conmon's ctl/winsz fifos).
	Bundle string
	// Rootfs is the mount point of the container's root filesystem while mounted.
	Rootfs string
	// LogPath is the k8s-file log conmon writes ("TIMESTAMP stream F|P line").
	LogPath string
	// AttachSocket is conmon's attach socket (a SOCK_SEQPACKET unix socket).
	AttachSocket string
	// ExitFile is where conmon writes the exit code of the container's process.
	ExitFile string
	// CgroupPath is the container's cgroup path relative to each hierarchy's root.
	CgroupPath string
	// CgroupsPathOCI is the spec's cgroupsPath where it differs from
	// CgroupPath: "SLICE:berth:ID" for runc --systemd-cgroup.
	CgroupsPathOCI string `json:",omitempty"`
	// CgroupSystemd: the container's cgroup is a systemd scope (CgroupUnit)
	// that runc created through systemd; ConmonUnit is the scope conmon was
	// moved into ("" where it stays in the engine's cgroup).
	CgroupSystemd bool   `json:",omitempty"`
	CgroupUnit    string `json:",omitempty"`
	ConmonUnit    string `json:",omitempty"`
	// ConmonCgroup is the cgroup conmon was moved into in split mode.
	ConmonCgroup string `json:",omitempty"`
	// StaticDir holds generated files that survive restarts (hosts, hostname, resolv.conf).
	StaticDir string

	State     ContainerState
	ConmonPID int
	PID       int
	ExitCode  int32
	// OOMKilled is true when the kernel's OOM killer killed a process of
	// the container under its memory limit before it exited.
	OOMKilled    bool
	StartedAt    time.Time
	FinishedAt   time.Time
	Error        string
	RestartCount int
	// StoppedByUser is set when the last stop came from a client (stop, kill,
	// pause has no effect on it); restart policies other than always honour it.
	StoppedByUser bool
	// StartPending is set from a start's runtime create until the start is
	// recorded: a container in StateCreated with it set had a start asked
	// (by a client or a restart policy) that an engine kill -9 cut before
	// the process ran; one created by init alone does not have it.
	StartPending bool `json:",omitempty"`
	Health       HealthCheckResults
	// Pod is the ID of the container's pod ("" for none); IsInfra marks
	// the pod's infra container.
	Pod     string `json:",omitempty"`
	IsInfra bool   `json:",omitempty"`
	// PauseProcess marks an infra container whose current run is a pause
	// process the engine started (no conmon: nothing to attach or exec to).
	PauseProcess bool `json:",omitempty"`
	// Checkpointed is set while a checkpoint of the container waits in
	// CheckpointPath (CRIU's images), written at CheckpointedAt with CRIU's
	// log in CheckpointLog.
	Checkpointed   bool      `json:"Checkpointed,omitempty"`
	CheckpointedAt time.Time `json:",omitempty"`
	CheckpointPath string    `json:",omitempty"`
	CheckpointLog  string    `json:",omitempty"`
	// Restored is set when the current run was restored from a checkpoint
	// (at RestoredAt, CRIU's log in RestoreLog).
	Restored   bool      `json:",omitempty"`
	RestoredAt time.Time `json:",omitempty"`
	RestoreLog string    `json:",omitempty"`
}

// ErrContainerStateImproper is Podman's "container state improper": the
// container's state does not allow the operation. It is an ErrStateConflict
// (409); clients such as the podman CLI look for its text.
var ErrContainerStateImproper error = stateImproper{}

type stateImproper struct{}

func (stateImproper) Error() string { return "container state improper" }

// Is makes errors.Is(err, ErrStateConflict) hold.
func (stateImproper) Is(target error) bool { return target == ErrStateConflict }

// ContainerEventType names what happened to a container.
type ContainerEventType string

// Container event types, as Podman names them in its event stream.
const (
	EventCreate ContainerEventType = "create"
	EventInit   ContainerEventType = "init"
	EventStart  ContainerEventType = "start"
	EventStop   ContainerEventType = "stop"
	EventKill   ContainerEventType = "kill"
	EventDied   ContainerEventType = "died"
	// EventOOM precedes EventDied when the OOM killer struck the container.
	EventOOM     ContainerEventType = "oom"
	EventPause   ContainerEventType = "pause"
	EventUnpause ContainerEventType = "unpause"
	EventRestart ContainerEventType = "restart"
	EventRemove  ContainerEventType = "remove"
	EventCleanup ContainerEventType = "cleanup"
	EventUpdate  ContainerEventType = "update"
	EventMount   ContainerEventType = "mount"
	EventUnmount ContainerEventType = "unmount"
	EventRename  ContainerEventType = "rename"
	EventCommit  ContainerEventType = "commit"
	// EventCheckpoint: the container was checkpointed; EventRestore: it
	// was restored from a checkpoint (in place or imported).
	EventCheckpoint ContainerEventType = "checkpoint"
	EventRestore    ContainerEventType = "restore"
)

// ContainerEvent is one state change of a container. ExitCode is set for
// EventDied (the container's process exited); Attributes holds extra
// data such as the signal of a kill.
type ContainerEvent struct {
	Type       ContainerEventType
	Time       time.Time
	ID         string
	Name       string
	Image      string
	Labels     map[string]string
	ExitCode   *int32
	Attributes map[string]string
	// Ran is how long the container ran, on a died event (its start to
	// its exit).
	Ran *time.Duration
	// RawImage is the image as the create request named it (Docker's
	// events name it so; Podman's the resolved name).
	RawImage string
	// DockerOnly marks an event dockerd sends and Podman does not: the
	// kill of each signal a stop sends. The libpod stream leaves it out.
	DockerOnly bool
}

// ExecSessionLister lists a container's exec sessions: kept, every one the
// engine still holds (Podman's inspect lists them), and live, those that
// have not ended (Docker's inspect lists only those).
type ExecSessionLister interface {
	ExecSessionIDs(ctx context.Context, containerID string) (kept, live []string, err error)
}

// ContainerHook receives container events. Hooks run synchronously after the
// change is committed, in registration order; a slow hook delays the caller,
// so hooks that do real work start their own goroutine.
type ContainerHook func(ctx context.Context, ev ContainerEvent)

// ExecRequest is one process to run inside a running container.
type ExecRequest struct {
	// Process is the process to run. Args are required; empty Env, Cwd and
	// User are taken from the container. Terminal selects a pseudo-terminal.
	Process specs.Process
	// Privileged gives the process every capability of the engine's
	// bounding set (podman exec --privileged, Docker's Privileged).
	Privileged bool
	// Stdin, Stdout and Stderr are connected to the process; nil means
	// /dev/null. With a terminal, Stderr is unused (the terminal merges both).
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// ExecProcess is a running exec process started by ContainerRuntime.Exec.
type ExecProcess interface {
	// Pid is the host PID of the process.
	Pid() int
	// Wait blocks until the process exits and its output is copied, and
	// returns its exit code (128+signal when killed by a signal).
	Wait() (int, error)
	// Signal sends sig to the process.
	Signal(sig syscall.Signal) error
	// Resize sets the terminal size; an error for a process without terminal.
	Resize(width, height uint16) error
}

// ContainerRuntime runs processes inside containers (runc exec).
type ContainerRuntime interface {
	Exec(ctx context.Context, c *Container, req ExecRequest) (ExecProcess, error)
}

// ListContainersOptions selects the containers ListContainers returns.
type ListContainersOptions struct {
	All  bool
	Last int
	Size bool
	// Detail fills each entry's MountDetails and NetworkDetails.
	Detail bool
	// Namespaces fills each running entry's Namespaces (podman ps --ns).
	Namespaces bool
	// Filters maps a filter name (id, name, label, status, exited, ancestor,
	// before, since) to its values; values of one name are ORed, names ANDed
	// (label and status are ANDed as Podman does for labels).
	Filters map[string][]string
}

// RemoveContainerOptions tunes RemoveContainer.
type RemoveContainerOptions struct {
	Force   bool
	Volumes bool
	Ignore  bool
	// Depend removes first every container that requires this one
	// (dependency_containers), theirs before them; Removed, when set, is
	// told the ID of each.
	Depend  bool
	Removed func(id string)
	// Timeout is the stop timeout for a running container removed with Force;
	// nil means the container's own stop timeout.
	Timeout *uint
	// WithPod is set by the pods backend when it removes a pod: only then
	// may the pod's infra container go.
	WithPod bool
}

// RemoveReport is the result for one removed container.
type RemoveReport struct {
	ID  string
	Err error
}

// UpdateContainerOptions changes a container's resources and restart policy.
type UpdateContainerOptions struct {
	Resources     *specs.LinuxResources
	RestartPolicy *string
	RestartTries  *uint
	// Health changes the healthchecks (nil: as they are).
	Health *HealthUpdate
	// Throttle*Device are per-device I/O limits by device path, as Podman
	// 5's update sends them; each replaces the limit of its device.
	ThrottleReadBpsDevice   map[string]specs.LinuxThrottleDevice
	ThrottleWriteBpsDevice  map[string]specs.LinuxThrottleDevice
	ThrottleReadIOPSDevice  map[string]specs.LinuxThrottleDevice
	ThrottleWriteIOPSDevice map[string]specs.LinuxThrottleDevice
	// Env sets variables ("NAME=value") and UnsetEnv removes them (Podman
	// 6's update --env, --unsetenv); Rlimits replaces the rlimits (its
	// --ulimit; nil: as they are). They apply from the next start on, and
	// to the execs a running container gets from now on.
	Env      []string
	UnsetEnv []string
	Rlimits  []rlimit.Rlimit
}

// Containers is the container domain of the engine. Every nameOrID accepts
// a full name, a full ID or a unique ID prefix; an unknown one yields
// ErrNoSuchContainer.
type Containers interface {
	Create(ctx context.Context, spec ContainerSpec) (id string, warnings []string, err error)
	Init(ctx context.Context, nameOrID string) error
	// Start starts a container; ErrNotModified when it is already running.
	Start(ctx context.Context, nameOrID string) error
	// Stop sends the stop signal, waits timeout seconds (nil: the container's
	// StopTimeout), then SIGKILL; ErrNotModified when it is not running.
	Stop(ctx context.Context, nameOrID string, timeout *uint) error
	// Kill sends a signal given by name ("TERM", "SIGKILL") or number.
	Kill(ctx context.Context, nameOrID string, signal string) error
	Restart(ctx context.Context, nameOrID string, timeout *uint) error
	// StopWithSignal and RestartWithSignal are Stop and Restart with signal
	// (a name or number, as Kill takes it) sent in place of the container's
	// stop signal: Docker's signal parameter (API 1.42).
	StopWithSignal(ctx context.Context, nameOrID string, timeout *uint, signal string) error
	RestartWithSignal(ctx context.Context, nameOrID string, timeout *uint, signal string) error
	Pause(ctx context.Context, nameOrID string) error
	Unpause(ctx context.Context, nameOrID string) error
	// Wait blocks until the container reaches one of the conditions (state
	// names, "healthy", "unhealthy"; empty: stopped or exited) and returns its
	// exit code.
	Wait(ctx context.Context, nameOrID string, conditions []string) (int32, error)
	Remove(ctx context.Context, nameOrID string, opts RemoveContainerOptions) error
	Prune(ctx context.Context, filters map[string][]string) ([]PruneReport, error)
	List(ctx context.Context, opts ListContainersOptions) ([]ListContainer, error)
	Inspect(ctx context.Context, nameOrID string, size bool) (*InspectContainerData, error)
	Exists(ctx context.Context, nameOrID string) (bool, error)
	Update(ctx context.Context, nameOrID string, opts UpdateContainerOptions) error

	// Lookup returns a snapshot of the container's record.
	Lookup(ctx context.Context, nameOrID string) (*Container, error)
	// Exec runs a process in a running container (ErrStateConflict otherwise).
	Exec(ctx context.Context, nameOrID string, req ExecRequest) (ExecProcess, error)
	// Subscribe registers a hook for every container event; the returned
	// function unregisters it.
	Subscribe(hook ContainerHook) (unsubscribe func())
	// SetHealth records the health state of a container (healthchecks).
	SetHealth(ctx context.Context, nameOrID string, health HealthCheckResults) error
	// StartByPolicy starts a container for its restart policy (or at the
	// engine's start) when want, asked under the container's lock, holds
	// for its state then: a client's stop, checkpoint or start since the
	// policy looked wins. countRestart adds one to RestartCount first. It
	// reports whether it started the container.
	StartByPolicy(ctx context.Context, nameOrID string, want func(*Container) bool, countRestart bool) (bool, error)
}

// ContainerMounts is the storage side of containers: mounting a
// container's root filesystem for a client, and renaming. A Containers
// implementation may also implement it (the handlers look for it).
type ContainerMounts interface {
	// Mount mounts the container's rootfs (counted) and returns its path.
	Mount(ctx context.Context, nameOrID string) (string, error)
	// Unmount releases one Mount; the rootfs is unmounted when the last
	// client mount goes and the container does not run.
	Unmount(ctx context.Context, nameOrID string) error
	// Mounted maps the ID of every container with a mounted rootfs to its path.
	Mounted(ctx context.Context) (map[string]string, error)
	// Rename gives a container a new name (ErrNameInUse when taken).
	Rename(ctx context.Context, nameOrID, newName string) error
}

// FileChange is one path changed in a container's writable layer; Kind is
// 0 modified, 1 added, 2 deleted (Podman's and Docker's numbering).
type FileChange struct {
	Path string `json:"Path"`
	Kind int    `json:"Kind"`
}

// ContainerFilesystems reads a container's root filesystem. A Containers
// implementation may also implement it.
type ContainerFilesystems interface {
	// Export writes the container's root filesystem to w as an uncompressed tar.
	Export(ctx context.Context, nameOrID string, w io.Writer) error
	// Changes lists what a container's or an image's top layer changed
	// (see ChangesOptions).
	Changes(ctx context.Context, nameOrID string, opts ChangesOptions) ([]FileChange, error)
}

// CheckpointOptions tune Checkpoint.
type CheckpointOptions struct {
	// LeaveRunning keeps the container running after the dump.
	LeaveRunning bool
	// TCPEstablished dumps established TCP connections.
	TCPEstablished bool
	// FileLocks dumps file locks.
	FileLocks bool
	// Keep keeps CRIU's logs and statistics, and with Export the checkpoint
	// itself (otherwise exported checkpoints leave the engine).
	Keep bool
	// Export, when set, receives the checkpoint as one archive (see
	// CheckpointArchive): CRIU's images, the container's configuration,
	// its root filesystem changes and its volumes.
	Export io.Writer
	// IgnoreRootFS leaves the root filesystem changes out of the export;
	// IgnoreVolumes leaves out the named volumes.
	IgnoreRootFS, IgnoreVolumes bool
	// PrintStats asks for CRIU's dump statistics in the report.
	PrintStats bool
}

// CheckpointReport is what Checkpoint did.
type CheckpointReport struct {
	// RuntimeDuration is how long the OCI runtime (CRIU) took.
	RuntimeDuration time.Duration
	// CRIUStatistics are CRIU's dump statistics (PrintStats), by CRIU's
	// field names (freezing_time, frozen_time, memdump_time ...).
	CRIUStatistics map[string]uint64
}

// RestoreOptions tune Restore and Import.
type RestoreOptions struct {
	TCPEstablished bool
	FileLocks      bool
	// Keep keeps the checkpoint (and CRIU's logs) after the restore.
	Keep bool
	// PrintStats asks for CRIU's restore statistics in the report.
	PrintStats bool
	// IgnoreStaticIP and IgnoreStaticMAC let the network pick the
	// container's addresses instead of the ones it had.
	IgnoreStaticIP, IgnoreStaticMAC bool
	// The rest apply to Import only. Name names the new container (else
	// the checkpointed one's name); PublishPorts, when set, replace its
	// published ports; Pod is the pod a pod member is restored into;
	// IgnoreRootFS and IgnoreVolumes skip the archive's root filesystem
	// changes and volumes.
	Name                        string
	PublishPorts                []PortMapping
	Pod                         string
	IgnoreRootFS, IgnoreVolumes bool
}

// RestoreReport is what Restore did.
type RestoreReport struct {
	// ID is the restored container (a new one for an import).
	ID              string
	RuntimeDuration time.Duration
	CRIUStatistics  map[string]uint64
}

// ContainerCheckpoints checkpoints running containers to disk with CRIU
// and restores them. A Containers implementation may also implement it.
type ContainerCheckpoints interface {
	// Checkpoint dumps a running container. Unless LeaveRunning, the
	// container is exited afterwards, restorable from its checkpoint.
	Checkpoint(ctx context.Context, nameOrID string, opts CheckpointOptions) (CheckpointReport, error)
	// Restore starts a checkpointed container from its checkpoint.
	Restore(ctx context.Context, nameOrID string, opts RestoreOptions) (RestoreReport, error)
	// Import creates a container from an exported checkpoint archive and
	// restores it. An archive that is not a checkpoint, is corrupt or has
	// entries that escape is an InvalidArgument naming the entry.
	Import(ctx context.Context, archive io.Reader, opts RestoreOptions) (RestoreReport, error)
}

// Restart policies.
const (
	RestartPolicyNo            = "no"
	RestartPolicyOnFailure     = "on-failure"
	RestartPolicyAlways        = "always"
	RestartPolicyUnlessStopped = "unless-stopped"
)

// HealthOnFailure is an action on a container that turned unhealthy,
// numbered on the wire as Podman numbers them (1 is Podman's "invalid").
type HealthOnFailure int

// Healthcheck on-failure actions.
const (
	HealthOnFailureNone    HealthOnFailure = 0
	HealthOnFailureKill    HealthOnFailure = 2
	HealthOnFailureRestart HealthOnFailure = 3
	HealthOnFailureStop    HealthOnFailure = 4
)

// String is the action's name as Podman's inspect shows it.
func (a HealthOnFailure) String() string {
	switch a {
	case HealthOnFailureNone:
		return "none"
	case HealthOnFailureKill:
		return "kill"
	case HealthOnFailureRestart:
		return "restart"
	case HealthOnFailureStop:
		return "stop"
	}
	return "invalid"
}

// ValidateHealth checks the healthcheck settings of a spec (at create, and
// after an update changed them).
func (s *ContainerSpec) ValidateHealth() error {
	if s.HealthCheckOnFailureAction.String() == "invalid" {
		return InvalidArgument("health_check_on_failure_action", fmt.Errorf("%d is not none (0), kill (2), restart (3) or stop (4)", s.HealthCheckOnFailureAction))
	}
	if sc := s.StartupHealthConfig; sc != nil {
		switch {
		case s.HealthConfig == nil || len(s.HealthConfig.Test) == 0 || s.HealthConfig.Test[0] == "NONE":
			return InvalidArgument("startupHealthConfig", errors.New("a startup healthcheck needs a healthcheck"))
		case len(sc.Test) == 0 || sc.Test[0] == "NONE" || sc.Test[0] == "":
			return InvalidArgument("startupHealthConfig", errors.New("the startup healthcheck needs a command"))
		case sc.Interval < 0 || sc.Timeout < 0 || sc.StartPeriod < 0 || sc.Retries < 0 || sc.Successes < 0:
			return InvalidArgument("startupHealthConfig", errors.New("durations, retries and successes must not be negative"))
		}
	}
	if err := ValidateHealthLogDestination(s.HealthLogDestination); err != nil {
		return InvalidArgument("healthLogDestination", err)
	}
	if hc := s.HealthConfig; hc != nil {
		if hc.Interval < 0 || hc.Timeout < 0 || hc.StartPeriod < 0 || hc.Retries < 0 {
			return InvalidArgument("healthconfig", errors.New("durations and retries must not be negative"))
		}
	}
	return nil
}

// StartupHealthConfig is a startup healthcheck: it runs on its interval
// from the container's start until it has succeeded Successes times in a
// row (0: once); Retries failures in a row restart the container. The
// regular healthcheck begins after it passed.
type StartupHealthConfig struct {
	HealthConfig
	Successes int `json:"Successes,omitempty"`
}

// Init container types (ContainerSpec.InitContainerType).
const (
	InitContainerAlways = "always"
	InitContainerOnce   = "once"
)

// Validate checks the request fields that do not need the image or the
// host; each error names its field (core.FieldError).
func (s *ContainerSpec) Validate() error {
	switch {
	case s.Image == "" && s.Rootfs == "":
		return InvalidArgument("image", errors.New("an image (or a rootfs) is required"))
	case s.Image != "" && s.Rootfs != "":
		return InvalidArgument("rootfs", errors.New("a container has an image or a rootfs, not both"))
	case s.RootfsOverlay && s.Rootfs == "":
		return InvalidArgument("rootfs_overlay", errors.New("needs a rootfs"))
	}
	if s.Name != "" && !validName(s.Name) {
		return InvalidArgument("name", fmt.Errorf("%q must match [a-zA-Z0-9][a-zA-Z0-9_.-]*", s.Name))
	}
	if s.Hostname != "" && (len(s.Hostname) > 64 || strings.ContainsAny(s.Hostname, " /\t\n\x00")) {
		return InvalidArgument("hostname", fmt.Errorf("%q is not a valid hostname", s.Hostname))
	}
	if s.Domainname != "" && (len(s.Domainname) > 64 || strings.ContainsAny(s.Domainname, " /\t\n\x00")) {
		return InvalidArgument("domainname", fmt.Errorf("%q is not a valid domain name", s.Domainname))
	}
	for k := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return InvalidArgument("env", fmt.Errorf("invalid variable name %q", k))
		}
	}
	for _, kv := range s.EnvMerge {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" || strings.ContainsAny(kv, "\x00") {
			return InvalidArgument("envmerge", fmt.Errorf("%q is not NAME=value", kv))
		}
	}
	for _, k := range s.UnsetEnv {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return InvalidArgument("unsetenv", fmt.Errorf("invalid variable name %q", k))
		}
	}
	if err := s.LogConfiguration.validate(); err != nil {
		return err
	}
	for i, v := range s.Volumes {
		if v.SubPath == "" {
			continue
		}
		if v.Name == "" {
			return InvalidArgument(fmt.Sprintf("volumes[%d].SubPath", i), errors.New("an anonymous volume is new and empty: it has no subpath to mount"))
		}
		if _, err := CleanVolumeSubPath(v.SubPath); err != nil {
			return InvalidArgument(fmt.Sprintf("volumes[%d].SubPath", i), err)
		}
	}
	if err := s.validateIPCAndUTS(); err != nil {
		return err
	}
	if b := s.BaseHostsFile; b != "" && b != "none" && b != "image" && (!path.IsAbs(b) || strings.ContainsAny(b, "\x00\n")) {
		return InvalidArgument("base_hosts_file", fmt.Errorf("%q is not none, image or an absolute path", b))
	}
	if s.UseImageHosts && s.BaseHostsFile != "" {
		return InvalidArgument("base_hosts_file", errors.New("a base for /etc/hosts needs the generated file, which use_image_hosts (--no-hosts) leaves out"))
	}
	if s.UseImageHosts && len(s.HostAdd) > 0 {
		return InvalidArgument("hostadd", errors.New("host entries need the generated /etc/hosts, which use_image_hosts (--no-hosts) leaves out"))
	}
	if s.UseImageResolvConf && len(s.DNSServers)+len(s.DNSSearch)+len(s.DNSOptions) > 0 {
		return InvalidArgument("dns_server", errors.New("DNS settings need the generated /etc/resolv.conf, which use_image_resolve_conf (--dns none) leaves out"))
	}
	if tz := s.Timezone; tz != "" && tz != "local" &&
		(strings.HasPrefix(tz, "/") || slices.Contains(strings.Split(tz, "/"), "..") || strings.ContainsAny(tz, "\x00\n")) {
		return InvalidArgument("timezone", fmt.Errorf("%q is not a time zone name (such as Europe/Berlin, or local)", tz))
	}
	if err := ValidateRestartPolicy(s.RestartPolicy, s.RestartTries); err != nil {
		return err
	}
	if s.StopSignal != nil && (*s.StopSignal < 1 || *s.StopSignal > 64) {
		return InvalidArgument("stop_signal", fmt.Errorf("%d is not a signal number", *s.StopSignal))
	}
	if s.OCIRuntime != "" && s.OCIRuntime != "runc" && s.OCIRuntime != "crun" {
		return InvalidArgument("oci_runtime", fmt.Errorf("%q is not runc or crun", s.OCIRuntime))
	}
	if len(s.Entrypoint) > 1 && s.Entrypoint[0] == "" {
		return InvalidArgument("entrypoint", errors.New("the first element must not be empty"))
	}
	switch s.InitContainerType {
	case "":
	case InitContainerAlways, InitContainerOnce:
	default:
		return InvalidArgument("init_container_type", fmt.Errorf("%q is not always or once", s.InitContainerType))
	}
	for _, d := range s.Devices {
		if IsCDIDevice(d.Path) {
			continue // the CDI registry checks these names
		}
		if _, _, _, err := ParseDevice(d.Path); err != nil {
			return InvalidArgument("devices", err)
		}
	}
	for i, r := range s.DeviceCgroupRules {
		if err := ValidateDeviceCgroupRule(r); err != nil {
			return InvalidArgument("device_cgroup_rule", fmt.Errorf("rule %d (%s): %w", i, FormatDeviceCgroupRule(r), err))
		}
	}
	if err := validateGroups(s.Groups); err != nil {
		return err
	}
	if err := s.ValidateHealth(); err != nil {
		return err
	}
	if err := s.validateSecurity(); err != nil {
		return err
	}
	return s.validateValues()
}

// Seccomp policies (Podman's seccomp_policy).
const (
	SeccompPolicyDefault = "default"
	SeccompPolicyImage   = "image"
)

// validateSecurity checks the confinement members that need neither the
// image nor the host.
func (s *ContainerSpec) validateSecurity() error {
	switch s.SeccompPolicy {
	case "", SeccompPolicyDefault, SeccompPolicyImage:
	default:
		return InvalidArgument("seccomp_policy", fmt.Errorf("%q is not default or image", s.SeccompPolicy))
	}
	if p := s.SeccompProfilePath; p != "" && p != "unconfined" && !strings.HasPrefix(p, "/") {
		return InvalidArgument("seccomp_profile_path", fmt.Errorf("%q is neither unconfined nor an absolute path", p))
	}
	if _, err := s.UserNSMode(); err != nil {
		return err
	}
	if _, err := s.AutoUserNSSize(); err != nil {
		return err
	}
	for _, p := range s.Mask {
		if !strings.HasPrefix(p, "/") || strings.Contains(p, "\x00") {
			return InvalidArgument("mask", fmt.Errorf("%q is not an absolute path", p))
		}
	}
	for _, p := range s.Unmask {
		if p != "ALL" && (!strings.HasPrefix(p, "/") || strings.Contains(p, "\x00")) {
			return InvalidArgument("unmask", fmt.Errorf("%q is neither ALL nor an absolute path", p))
		}
	}
	return nil
}

// ValidateRestartPolicy checks a restart policy name and its retry count.
func ValidateRestartPolicy(policy string, tries *uint) error {
	switch policy {
	case "", RestartPolicyNo, RestartPolicyAlways, RestartPolicyUnlessStopped:
		if tries != nil && *tries > 0 {
			return InvalidArgument("restart_tries", errors.New("retries are only allowed with the on-failure policy"))
		}
	case RestartPolicyOnFailure:
	default:
		return InvalidArgument("restart_policy", fmt.Errorf("%q is not no, on-failure, always or unless-stopped", policy))
	}
	return nil
}

func validName(n string) bool {
	for i, r := range n {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || (r != '_' && r != '.' && r != '-')) {
			return false
		}
	}
	return n != ""
}

// IDMappingOptions is Podman's idmappings member of the creation request.
type IDMappingOptions struct {
	HostUIDMapping bool              `json:"HostUIDMapping"`
	HostGIDMapping bool              `json:"HostGIDMapping"`
	UIDMap         []IDMap           `json:"UIDMap"`
	GIDMap         []IDMap           `json:"GIDMap"`
	AutoUserNs     bool              `json:"AutoUserNs"`
	AutoUserNsOpts AutoUserNsOptions `json:"AutoUserNsOpts"`
}

// AutoUserNsOptions are --userns=auto's options; the engine takes Size
// (and InitialSize as a lower bound) and refuses the others.
type AutoUserNsOptions struct {
	Size                  uint32  `json:"Size"`
	InitialSize           uint32  `json:"InitialSize"`
	PasswdFile            string  `json:"PasswdFile"`
	GroupFile             string  `json:"GroupFile"`
	AdditionalUIDMappings []IDMap `json:"AdditionalUIDMappings"`
	AdditionalGIDMappings []IDMap `json:"AdditionalGIDMappings"`
}

// User namespace modes.
const (
	UserNSHost    = "host"
	UserNSAuto    = "auto"
	UserNSPrivate = "private"
)

// UserNSMode says which user namespace the request asks for: "" (the
// host's), UserNSAuto or UserNSPrivate, reading both the userns member and
// idmappings (podman sends both).
func (s *ContainerSpec) UserNSMode() (string, error) {
	m := s.IDMappings
	switch s.UserNS.NSMode {
	case "", UserNSHost:
		if m != nil && (m.AutoUserNs || len(m.UIDMap) > 0 || len(m.GIDMap) > 0) {
			if s.UserNS.NSMode == UserNSHost {
				return "", InvalidArgument("idmappings", errors.New("mappings conflict with --userns=host"))
			}
			if m.AutoUserNs {
				return UserNSAuto, nil
			}
			return UserNSPrivate, nil
		}
		return "", nil
	case UserNSAuto:
		return UserNSAuto, nil
	case UserNSPrivate:
		if m == nil || len(m.UIDMap) == 0 || len(m.GIDMap) == 0 {
			return "", InvalidArgument("idmappings", errors.New("a private user namespace needs both a uid and a gid map (--uidmap, --gidmap)"))
		}
		return UserNSPrivate, nil
	}
	return "", InvalidArgument("userns", fmt.Errorf("mode %q is not supported (host, auto, private with --uidmap/--gidmap)", s.UserNS.NSMode))
}

// AutoUserNSSize parses --userns=auto's value ("size=N", "" for the
// engine's choice) and the idmappings' AutoUserNsOpts.
func (s *ContainerSpec) AutoUserNSSize() (uint32, error) {
	var size uint32
	if s.IDMappings != nil {
		o := s.IDMappings.AutoUserNsOpts
		if o.PasswdFile != "" || o.GroupFile != "" || len(o.AdditionalUIDMappings) > 0 || len(o.AdditionalGIDMappings) > 0 {
			return 0, InvalidArgument("userns", errors.New("auto options other than size are not supported"))
		}
		size = max(o.Size, o.InitialSize)
	}
	if s.UserNS.NSMode == UserNSAuto && s.UserNS.Value != "" {
		for _, opt := range strings.Split(s.UserNS.Value, ",") {
			k, v, _ := strings.Cut(opt, "=")
			if k != "size" {
				return 0, InvalidArgument("userns", fmt.Errorf("auto option %q is not supported (size=N)", opt))
			}
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil || n == 0 {
				return 0, InvalidArgument("userns", fmt.Errorf("size %q is not a positive number", v))
			}
			size = uint32(n)
		}
	}
	return size, nil
}

// CheckCgroupsMode checks a value of podman's --cgroups (cgroups_mode):
// enabled, no-conmon, split and disabled. Whether the host and the
// engine's OCI runtime can honour split and disabled is the containers
// backend's to say (disabled needs crun).
func CheckCgroupsMode(mode string) error {
	switch mode {
	case "", "enabled", "no-conmon", "split", CgroupsDisabled:
		return nil
	}
	return fmt.Errorf("unknown mode %q (enabled, no-conmon, disabled, split)", mode)
}

// CgroupsDisabled is podman's --cgroups disabled: the container gets no
// cgroup of its own and runs in the one its conmon (the engine's) is in.
const CgroupsDisabled = "disabled"

// NoCgroup reports whether the container runs without a cgroup of its own
// (--cgroups disabled): it has no stats, top, pause or limits.
func (c *Container) NoCgroup() bool { return c.Spec.CgroupsMode == CgroupsDisabled }

// ErrNoCgroup is Podman's answer to stats, top, pause and resource
// updates of a container that has no cgroup of its own (409).
var ErrNoCgroup error = noCgroup{}

type noCgroup struct{}

func (noCgroup) Error() string { return "this container does not have a cgroup" }

// Is makes errors.Is(err, ErrStateConflict) hold.
func (noCgroup) Is(target error) bool { return target == ErrStateConflict }

// IPC and UTS namespace modes (IpcNS.NSMode, UtsNS.NSMode) beyond the default.
const (
	// NSContainer joins another container's namespace (Value: its name,
	// recorded by ID).
	NSContainer = "container"
	// NSPath joins the namespace at Value, a path such as /proc/PID/ns/ipc
	// (podman's ns:PATH).
	NSPath         = "path"
	IPCNSNone      = "none"
	IPCNSPrivate   = "private"
	IPCNSShareable = "shareable"
	IPCNSContainer = "container"
	NSHost         = "host"
)

// SharesIPC reports whether the container's IPC namespace and /dev/shm can
// be joined by others (mode shareable or the default).
func (s *ContainerSpec) SharesIPC() bool {
	return s.IpcNS.NSMode == "" || s.IpcNS.NSMode == IPCNSShareable
}

// validateIPCAndUTS refuses the IPC and UTS modes the engine has not, and
// what a host namespace makes meaningless (a /dev/shm size, a hostname).
func (s *ContainerSpec) validateIPCAndUTS() error {
	switch s.IpcNS.NSMode {
	case "", IPCNSPrivate, IPCNSShareable, IPCNSNone:
	case NSHost:
		if s.ShmSize != nil {
			return InvalidArgument("shm_size", errors.New("a container in the host's IPC namespace uses the host's /dev/shm"))
		}
	case IPCNSContainer:
		if s.IpcNS.Value == "" {
			return InvalidArgument("ipcns", errors.New("mode container needs the container to join"))
		}
		if s.ShmSize != nil {
			return InvalidArgument("shm_size", fmt.Errorf("a container that joins the IPC namespace of %s uses its /dev/shm", s.IpcNS.Value))
		}
	case NSPath:
	default:
		return InvalidArgument("ipcns", fmt.Errorf("mode %q is not supported (shareable, private, none, host, container:ID, ns:PATH)", s.IpcNS.NSMode))
	}
	if s.IpcNS.Value != "" && s.IpcNS.NSMode != IPCNSContainer && s.IpcNS.NSMode != NSPath {
		return InvalidArgument("ipcns", fmt.Errorf("mode %s takes no value", s.IpcNS.NSMode))
	}
	switch s.UtsNS.NSMode {
	case "", "private":
	case NSHost, NSContainer, NSPath:
		if s.Hostname != "" {
			return InvalidArgument("hostname", errors.New("a container in another UTS namespace (the host's or a container's) has its hostname"))
		}
		if s.Domainname != "" {
			return InvalidArgument("domainname", errors.New("a container in another UTS namespace (the host's or a container's) has its domain name"))
		}
	default:
		return InvalidArgument("utsns", fmt.Errorf("mode %q is not supported (private, host, container:ID, ns:PATH)", s.UtsNS.NSMode))
	}
	switch s.PidNS.NSMode {
	case "", "private", NSHost, NSContainer, NSPath:
	default:
		return InvalidArgument("pidns", fmt.Errorf("mode %q is not supported (private, host, container:ID, ns:PATH)", s.PidNS.NSMode))
	}
	for field, ns := range map[string]Namespace{"utsns": s.UtsNS, "pidns": s.PidNS, "ipcns": s.IpcNS} {
		if ns.NSMode == NSContainer && ns.Value == "" {
			return InvalidArgument(field, errors.New("mode container needs the container to join"))
		}
		if ns.NSMode == NSPath && !path.IsAbs(ns.Value) {
			return InvalidArgument(field, fmt.Errorf("namespace path %q is not absolute", ns.Value))
		}
		if ns.NSMode != NSContainer && ns.NSMode != NSPath && ns.Value != "" {
			return InvalidArgument(field, fmt.Errorf("mode %s takes no value", ns.NSMode))
		}
	}
	return nil
}

// throttleDeviceLists pairs each per-device throttle of the request (by
// path) with the resource list it goes into, and the member that names it.
func (s *ContainerSpec) throttleDeviceLists(b *specs.LinuxBlockIO) []struct {
	field  string
	byPath map[string]specs.LinuxThrottleDevice
	list   *[]specs.LinuxThrottleDevice
} {
	return []struct {
		field  string
		byPath map[string]specs.LinuxThrottleDevice
		list   *[]specs.LinuxThrottleDevice
	}{
		{"throttleReadBpsDevice", s.ThrottleReadBpsDevice, &b.ThrottleReadBpsDevice},
		{"throttleWriteBpsDevice", s.ThrottleWriteBpsDevice, &b.ThrottleWriteBpsDevice},
		{"throttleReadIOPSDevice", s.ThrottleReadIOPSDevice, &b.ThrottleReadIOPSDevice},
		{"throttleWriteIOPSDevice", s.ThrottleWriteIOPSDevice, &b.ThrottleWriteIOPSDevice},
	}
}

// ResolveThrottleDevices adds the per-device throttles given by path to
// Resources.BlockIO by device number, which blockDevice reads for a path
// (an error when it is not a block device: a 400 naming the member). An
// entry for the same device already there takes the new rate, so resolving
// twice changes nothing.
func (s *ContainerSpec) ResolveThrottleDevices(blockDevice func(path string) (major, minor int64, err error)) error {
	if len(s.ThrottleReadBpsDevice)+len(s.ThrottleWriteBpsDevice)+len(s.ThrottleReadIOPSDevice)+len(s.ThrottleWriteIOPSDevice) == 0 {
		return nil
	}
	if s.Resources == nil {
		s.Resources = &specs.LinuxResources{}
	}
	if s.Resources.BlockIO == nil {
		s.Resources.BlockIO = &specs.LinuxBlockIO{}
	}
	for _, t := range s.throttleDeviceLists(s.Resources.BlockIO) {
		for _, path := range slices.Sorted(maps.Keys(t.byPath)) {
			major, minor, err := blockDevice(path)
			if err != nil {
				return InvalidArgument(t.field, err)
			}
			dev := specs.LinuxThrottleDevice{Rate: t.byPath[path].Rate}
			dev.Major, dev.Minor = major, minor
			i := slices.IndexFunc(*t.list, func(d specs.LinuxThrottleDevice) bool { return d.Major == major && d.Minor == minor })
			if i >= 0 {
				(*t.list)[i] = dev
			} else {
				*t.list = append(*t.list, dev)
			}
		}
	}
	return nil
}

// InspectThrottles lists byPath's throttles sorted by path (nil for none).
func InspectThrottles(byPath map[string]specs.LinuxThrottleDevice) []InspectBlkioThrottleDevice {
	var out []InspectBlkioThrottleDevice
	for _, path := range slices.Sorted(maps.Keys(byPath)) {
		out = append(out, InspectBlkioThrottleDevice{Path: path, Rate: byPath[path].Rate})
	}
	return out
}
