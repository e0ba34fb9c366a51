package core

import "time"

// ListContainer is one entry of ListContainers, with Podman's field names.
type ListContainer struct {
	AutoRemove bool                    `json:"AutoRemove"`
	Command    []string                `json:"Command"`
	Created    time.Time               `json:"Created"`
	CreatedAt  string                  `json:"CreatedAt"`
	Exited     bool                    `json:"Exited"`
	ExitedAt   int64                   `json:"ExitedAt"`
	ExitCode   int32                   `json:"ExitCode"`
	ID         string                  `json:"Id"`
	Image      string                  `json:"Image"`
	ImageID    string                  `json:"ImageID"`
	IsInfra    bool                    `json:"IsInfra"`
	Labels     map[string]string       `json:"Labels"`
	Mounts     []string                `json:"Mounts"`
	Names      []string                `json:"Names"`
	Namespaces ListContainerNamespaces `json:"Namespaces"`
	Networks   []string                `json:"Networks"`
	Pid        int                     `json:"Pid"`
	Pod        string                  `json:"Pod"`
	PodName    string                  `json:"PodName"`
	Ports      []PortMapping           `json:"Ports"`
	Size       *ContainerSize          `json:"Size"`
	StartedAt  int64                   `json:"StartedAt"`
	State      string                  `json:"State"`
	Status     string                  `json:"Status"`
	// MountDetails and NetworkDetails are filled on request
	// (ListContainersOptions.Detail) for Docker's ps, which shows each
	// mount as inspect does and each network's addresses; Compose compares
	// them with its project before it keeps a container.
	MountDetails   []InspectMount         `json:"-"`
	NetworkDetails map[string]StatusBlock `json:"-"`
	// RawImage is the image as the create named it (Docker's ps shows it
	// so; Podman's the resolved name).
	RawImage string `json:"-"`
	// NetworkMode is the container's network mode as inspect shows it
	// (bridge, host, none, container:ID...).
	NetworkMode string `json:"-"`
}

// ListContainerNamespaces names the namespaces of a listed container.
type ListContainerNamespaces struct {
	MNT    string `json:"Mnt,omitempty"`
	Cgroup string `json:"Cgroup,omitempty"`
	IPC    string `json:"Ipc,omitempty"`
	NET    string `json:"Net,omitempty"`
	PIDNS  string `json:"Pidns,omitempty"`
	UTS    string `json:"Uts,omitempty"`
	User   string `json:"User,omitempty"`
}

// ContainerSize is the size of a container's root filesystem and writable layer.
type ContainerSize struct {
	RootFsSize int64 `json:"rootFsSize"`
	RwSize     int64 `json:"rwSize"`
}

// HealthCheckResults is the health state of a container.
type HealthCheckResults struct {
	Status        string           `json:"Status"`
	FailingStreak int              `json:"FailingStreak"`
	Log           []HealthCheckLog `json:"Log"`
}

// HealthCheckLog is the result of one healthcheck run.
type HealthCheckLog struct {
	Start    string `json:"Start"`
	End      string `json:"End"`
	ExitCode int    `json:"ExitCode"`
	Output   string `json:"Output"`
}

// InspectContainerData is GetContainer's answer, with Podman's field names.
type InspectContainerData struct {
	ID              string                 `json:"Id"`
	Created         time.Time              `json:"Created"`
	Path            string                 `json:"Path"`
	Args            []string               `json:"Args"`
	State           *InspectContainerState `json:"State"`
	Image           string                 `json:"Image"`
	ImageDigest     string                 `json:"ImageDigest"`
	ImageName       string                 `json:"ImageName"`
	Rootfs          string                 `json:"Rootfs"`
	Pod             string                 `json:"Pod"`
	ResolvConfPath  string                 `json:"ResolvConfPath"`
	HostnamePath    string                 `json:"HostnamePath"`
	HostsPath       string                 `json:"HostsPath"`
	StaticDir       string                 `json:"StaticDir"`
	OCIConfigPath   string                 `json:"OCIConfigPath,omitempty"`
	OCIRuntime      string                 `json:"OCIRuntime,omitempty"`
	ConmonPidFile   string                 `json:"ConmonPidFile"`
	PidFile         string                 `json:"PidFile"`
	Name            string                 `json:"Name"`
	RestartCount    int32                  `json:"RestartCount"`
	Driver          string                 `json:"Driver"`
	MountLabel      string                 `json:"MountLabel"`
	ProcessLabel    string                 `json:"ProcessLabel"`
	AppArmorProfile string                 `json:"AppArmorProfile"`
	EffectiveCaps   []string               `json:"EffectiveCaps"`
	BoundingCaps    []string               `json:"BoundingCaps"`
	// SeccompProfilePath names the container's system call filter:
	// "unconfined", the profile file it was created with, or the file of
	// the engine's default profile (a Berth addition to Podman's fields).
	SeccompProfilePath string                      `json:"SeccompProfilePath"`
	ExecIDs            []string                    `json:"ExecIDs"`
	GraphDriver        *DriverData                 `json:"GraphDriver"`
	SizeRw             *int64                      `json:"SizeRw,omitempty"`
	SizeRootFs         int64                       `json:"SizeRootFs,omitempty"`
	Mounts             []InspectMount              `json:"Mounts"`
	Dependencies       []string                    `json:"Dependencies"`
	NetworkSettings    *InspectNetworkSettings     `json:"NetworkSettings"`
	Namespace          string                      `json:"Namespace"`
	IsInfra            bool                        `json:"IsInfra"`
	IsService          bool                        `json:"IsService"`
	Config             *InspectContainerConfig     `json:"Config"`
	HostConfig         *InspectContainerHostConfig `json:"HostConfig"`
	// LiveExecIDs are the exec sessions that have not ended (Docker's
	// ExecIDs).
	LiveExecIDs []string `json:"-"`
}

// DriverData names the storage driver of a container and its paths.
type DriverData struct {
	Name string            `json:"Name"`
	Data map[string]string `json:"Data"`
}

// InspectContainerState is the State member of InspectContainerData.
type InspectContainerState struct {
	OciVersion string             `json:"OciVersion"`
	Status     string             `json:"Status"`
	Running    bool               `json:"Running"`
	Paused     bool               `json:"Paused"`
	Restarting bool               `json:"Restarting"`
	OOMKilled  bool               `json:"OOMKilled"`
	Dead       bool               `json:"Dead"`
	Pid        int                `json:"Pid"`
	ConmonPid  int                `json:"ConmonPid,omitempty"`
	ExitCode   int32              `json:"ExitCode"`
	Error      string             `json:"Error"`
	StartedAt  time.Time          `json:"StartedAt"`
	FinishedAt time.Time          `json:"FinishedAt"`
	Health     HealthCheckResults `json:"Health,omitempty"`
	CgroupPath string             `json:"CgroupPath,omitempty"`
	// Checkpoint and restore, as Podman reports them.
	Checkpointed   bool      `json:"Checkpointed,omitempty"`
	CheckpointPath string    `json:"CheckpointPath,omitempty"`
	CheckpointLog  string    `json:"CheckpointLog,omitempty"`
	CheckpointedAt time.Time `json:"CheckpointedAt,omitempty"`
	Restored       bool      `json:"Restored,omitempty"`
	RestoreLog     string    `json:"RestoreLog,omitempty"`
	RestoredAt     time.Time `json:"RestoredAt,omitempty"`
}

// InspectMount is one mount of an inspected container.
type InspectMount struct {
	Type        string   `json:"Type"`
	Name        string   `json:"Name,omitempty"`
	Source      string   `json:"Source"`
	Destination string   `json:"Destination"`
	Driver      string   `json:"Driver"`
	Mode        string   `json:"Mode"`
	Options     []string `json:"Options"`
	RW          bool     `json:"RW"`
	Propagation string   `json:"Propagation"`
	// SubPath is the part of a volume or image mounted (Podman 5's field).
	SubPath string `json:"SubPath,omitempty"`
}

// InspectHostPort is one host address a container port is published on.
type InspectHostPort struct {
	HostIP   string `json:"HostIp"`
	HostPort string `json:"HostPort"`
}

// InspectAddress is an extra address of a container's interface.
type InspectAddress struct {
	Addr         string `json:"Addr"`
	PrefixLength int    `json:"PrefixLength"`
}

// InspectBasicNetworkConfig is a container's address on a network.
type InspectBasicNetworkConfig struct {
	EndpointID             string           `json:"EndpointID"`
	Gateway                string           `json:"Gateway"`
	IPAddress              string           `json:"IPAddress"`
	IPPrefixLen            int              `json:"IPPrefixLen"`
	SecondaryIPAddresses   []InspectAddress `json:"SecondaryIPAddresses,omitempty"`
	IPv6Gateway            string           `json:"IPv6Gateway"`
	GlobalIPv6Address      string           `json:"GlobalIPv6Address"`
	GlobalIPv6PrefixLen    int              `json:"GlobalIPv6PrefixLen"`
	SecondaryIPv6Addresses []InspectAddress `json:"SecondaryIPv6Addresses,omitempty"`
	MacAddress             string           `json:"MacAddress"`
	AdditionalMacAddresses []string         `json:"AdditionalMACAddresses,omitempty"`
}

// InspectAdditionalNetwork is a container's view of one of its networks.
type InspectAdditionalNetwork struct {
	InspectBasicNetworkConfig
	NetworkID  string            `json:"NetworkID,omitempty"`
	DriverOpts map[string]string `json:"DriverOpts"`
	IPAMConfig map[string]string `json:"IPAMConfig"`
	Links      []string          `json:"Links"`
	Aliases    []string          `json:"Aliases,omitempty"`
}

// InspectNetworkSettings is the network part of an inspected container.
type InspectNetworkSettings struct {
	InspectBasicNetworkConfig
	Bridge                 string                               `json:"Bridge"`
	SandboxID              string                               `json:"SandboxID"`
	HairpinMode            bool                                 `json:"HairpinMode"`
	LinkLocalIPv6Address   string                               `json:"LinkLocalIPv6Address"`
	LinkLocalIPv6PrefixLen int                                  `json:"LinkLocalIPv6PrefixLen"`
	Ports                  map[string][]InspectHostPort         `json:"Ports"`
	SandboxKey             string                               `json:"SandboxKey"`
	Networks               map[string]*InspectAdditionalNetwork `json:"Networks,omitempty"`
}

// InspectContainerConfig is the Config member of InspectContainerData.
// Entrypoint is one string, as Podman 4 sends it.
type InspectContainerConfig struct {
	Hostname     string              `json:"Hostname"`
	DomainName   string              `json:"Domainname"`
	User         string              `json:"User"`
	AttachStdin  bool                `json:"AttachStdin"`
	AttachStdout bool                `json:"AttachStdout"`
	AttachStderr bool                `json:"AttachStderr"`
	Tty          bool                `json:"Tty"`
	OpenStdin    bool                `json:"OpenStdin"`
	StdinOnce    bool                `json:"StdinOnce"`
	Env          []string            `json:"Env"`
	Cmd          []string            `json:"Cmd"`
	Image        string              `json:"Image"`
	Volumes      map[string]struct{} `json:"Volumes"`
	WorkingDir   string              `json:"WorkingDir"`
	Entrypoint   string              `json:"Entrypoint"`
	OnBuild      *string             `json:"OnBuild"`
	Labels       map[string]string   `json:"Labels"`
	Annotations  map[string]string   `json:"Annotations"`
	StopSignal   uint                `json:"StopSignal"`
	Healthcheck  *HealthConfig       `json:"Healthcheck,omitempty"`
	// HealthcheckOnFailureAction names the on-failure action ("none" ...).
	HealthcheckOnFailureAction string `json:"HealthcheckOnFailureAction,omitempty"`
	// StartupHealthCheck is the startup healthcheck, as Podman 5 shows it.
	StartupHealthCheck *StartupHealthConfig `json:"StartupHealthCheck,omitempty"`
	// The healthcheck log's destination and bounds, as Podman 5 shows them.
	HealthLogDestination string `json:"HealthLogDestination,omitempty"`
	// Podman's wire names are Healthcheck..., not its Go fields' names.
	HealthMaxLogCount uint     `json:"HealthcheckMaxLogCount,omitempty"`
	HealthMaxLogSize  uint     `json:"HealthcheckMaxLogSize,omitempty"`
	CreateCommand     []string `json:"CreateCommand,omitempty"`
	Umask             string   `json:"Umask,omitempty"`
	Timezone          string   `json:"Timezone,omitempty"`
	Timeout           uint     `json:"Timeout"`
	StopTimeout       uint     `json:"StopTimeout"`
}

// InspectRestartPolicy is a container's restart policy.
type InspectRestartPolicy struct {
	Name              string `json:"Name"`
	MaximumRetryCount uint   `json:"MaximumRetryCount"`
}

// InspectLogConfig describes a container's log.
type InspectLogConfig struct {
	Type   string            `json:"Type"`
	Config map[string]string `json:"Config"`
	Path   string            `json:"Path"`
	Tag    string            `json:"Tag"`
	Size   string            `json:"Size"`
}

// InspectUlimit is one rlimit of an inspected container; unlimited is -1.
type InspectUlimit struct {
	Name string `json:"Name"`
	Soft int64  `json:"Soft"`
	Hard int64  `json:"Hard"`
}

// InspectDevice is a device given to a container, as Podman's inspect
// shows it.
type InspectDevice struct {
	PathOnHost        string `json:"PathOnHost"`
	PathInContainer   string `json:"PathInContainer"`
	CgroupPermissions string `json:"CgroupPermissions"`
}

// InspectContainerHostConfig is the HostConfig member of InspectContainerData.
type InspectContainerHostConfig struct {
	// Annotations are the container's OCI annotations, as in Config.
	Annotations       map[string]string            `json:"Annotations,omitempty"`
	Binds             []string                     `json:"Binds"`
	CgroupManager     string                       `json:"CgroupManager,omitempty"`
	CgroupMode        string                       `json:"CgroupMode"`
	ContainerIDFile   string                       `json:"ContainerIDFile"`
	LogConfig         *InspectLogConfig            `json:"LogConfig"`
	NetworkMode       string                       `json:"NetworkMode"`
	PortBindings      map[string][]InspectHostPort `json:"PortBindings"`
	RestartPolicy     *InspectRestartPolicy        `json:"RestartPolicy"`
	AutoRemove        bool                         `json:"AutoRemove"`
	VolumeDriver      string                       `json:"VolumeDriver"`
	VolumesFrom       []string                     `json:"VolumesFrom"`
	CapAdd            []string                     `json:"CapAdd"`
	CapDrop           []string                     `json:"CapDrop"`
	Devices           []InspectDevice              `json:"Devices"`
	DeviceCgroupRules []string                     `json:"DeviceCgroupRules"`
	DNS               []string                     `json:"Dns"`
	DNSOptions        []string                     `json:"DnsOptions"`
	DNSSearch         []string                     `json:"DnsSearch"`
	ExtraHosts        []string                     `json:"ExtraHosts"`
	GroupAdd          []string                     `json:"GroupAdd"`
	IpcMode           string                       `json:"IpcMode"`
	Cgroup            string                       `json:"Cgroup"`
	Cgroups           string                       `json:"Cgroups"`
	Links             []string                     `json:"Links"`
	OomScoreAdj       int                          `json:"OomScoreAdj"`
	PidMode           string                       `json:"PidMode"`
	CgroupnsMode      string                       `json:"CgroupnsMode,omitempty"`
	Privileged        bool                         `json:"Privileged"`
	PublishAllPorts   bool                         `json:"PublishAllPorts"`
	ReadonlyRootfs    bool                         `json:"ReadonlyRootfs"`
	SecurityOpt       []string                     `json:"SecurityOpt"`
	Tmpfs             map[string]string            `json:"Tmpfs"`
	UTSMode           string                       `json:"UTSMode"`
	UsernsMode        string                       `json:"UsernsMode"`
	// IDMappings are the user namespace's mappings ("0:HOSTID:SIZE"),
	// absent in the host's user namespace.
	IDMappings   *InspectIDMappings `json:"IDMappings,omitempty"`
	ShmSize      int64              `json:"ShmSize"`
	Runtime      string             `json:"Runtime"`
	ConsoleSize  []uint             `json:"ConsoleSize"`
	Isolation    string             `json:"Isolation"`
	CPUShares    uint64             `json:"CpuShares"`
	Memory       int64              `json:"Memory"`
	NanoCpus     int64              `json:"NanoCpus"`
	CgroupParent string             `json:"CgroupParent"`
	BlkioWeight  uint16             `json:"BlkioWeight"`
	// BlkioDevice* are the per-device throttles, by path, as Podman shows
	// them (null for none).
	BlkioDeviceReadBps   []InspectBlkioThrottleDevice `json:"BlkioDeviceReadBps"`
	BlkioDeviceWriteBps  []InspectBlkioThrottleDevice `json:"BlkioDeviceWriteBps"`
	BlkioDeviceReadIOps  []InspectBlkioThrottleDevice `json:"BlkioDeviceReadIOps"`
	BlkioDeviceWriteIOps []InspectBlkioThrottleDevice `json:"BlkioDeviceWriteIOps"`
	CPUPeriod            uint64                       `json:"CpuPeriod"`
	CPUQuota             int64                        `json:"CpuQuota"`
	CpusetCpus           string                       `json:"CpusetCpus"`
	CpusetMems           string                       `json:"CpusetMems"`
	MemoryReservation    int64                        `json:"MemoryReservation"`
	MemorySwap           int64                        `json:"MemorySwap"`
	MemorySwappiness     int64                        `json:"MemorySwappiness"`
	OomKillDisable       bool                         `json:"OomKillDisable"`
	PidsLimit            int64                        `json:"PidsLimit"`
	Ulimits              []InspectUlimit              `json:"Ulimits"`
	CgroupConf           map[string]string            `json:"CgroupConf"`
	Init                 bool                         `json:"Init,omitempty"`
}

// InspectIDMappings is HostConfig.IDMappings, as Podman shows it.
type InspectIDMappings struct {
	UIDMap []string `json:"UidMap"`
	GIDMap []string `json:"GidMap"`
}

// InspectBlkioThrottleDevice is one per-device throttle of HostConfig.
type InspectBlkioThrottleDevice struct {
	Path string `json:"Path"`
	Rate uint64 `json:"Rate"`
}
