package core

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Pod exit policies: what the pod does when its last member exits.
const (
	PodExitPolicyContinue = "continue"
	PodExitPolicyStop     = "stop"
)

// Pod states, as Podman derives them from the states of a pod's containers.
const (
	PodStateCreated  = "Created"
	PodStateRunning  = "Running"
	PodStateDegraded = "Degraded"
	PodStatePaused   = "Paused"
	PodStateExited   = "Exited"
	PodStateStopped  = "Stopped"
	PodStateErrored  = "Error"
)

// Namespaces a pod's members may share with its infra container.
const (
	PodShareNet = "net"
	PodShareIPC = "ipc"
	PodShareUTS = "uts"
	PodSharePID = "pid"
)

// PodSpec is PodCreate's request: Podman's PodSpecGenerator JSON as
// `podman --remote pod create` 4.3.1 sends it. Every member is known (the
// decoder refuses others); Validate refuses the ones the engine does not offer.
type PodSpec struct {
	Name             string            `json:"name,omitempty"`
	Hostname         string            `json:"hostname,omitempty"`
	ExitPolicy       string            `json:"exit_policy,omitempty"`
	Labels           map[string]string `json:"labels,omitempty"`
	NoInfra          bool              `json:"no_infra,omitempty"`
	InfraCommand     []string          `json:"infra_command,omitempty"`
	InfraImage       string            `json:"infra_image,omitempty"`
	InfraName        string            `json:"infra_name,omitempty"`
	SharedNamespaces []string          `json:"shared_namespaces,omitempty"`
	// ShareParent (default true) puts every member under the pod's cgroup.
	ShareParent   *bool     `json:"share_parent,omitempty"`
	CreateCommand []string  `json:"pod_create_command,omitempty"`
	PidNS         Namespace `json:"pidns"`
	IpcNS         Namespace `json:"ipcns"`
	UtsNS         Namespace `json:"utsns"`
	UserNS        Namespace `json:"userns"`
	// NetNS is the infra container's network namespace, shared by the members.
	NetNS Namespace `json:"netns"`
	// PortMappings are published on the infra container; Networks (or the
	// older CNINetworks) are the networks it joins in bridge mode.
	PortMappings []PortMapping                `json:"portmappings,omitempty"`
	Networks     map[string]PerNetworkOptions `json:"Networks,omitempty"`
	CNINetworks  []string                     `json:"cni_networks,omitempty"`
	// NetworkOptions are per-driver network options (slirp4netns, pasta).
	NetworkOptions     map[string][]string `json:"network_options,omitempty"`
	DNSServers         []string            `json:"dns_server,omitempty"`
	DNSSearch          []string            `json:"dns_search,omitempty"`
	DNSOptions         []string            `json:"dns_option,omitempty"`
	HostAdd            []string            `json:"hostadd,omitempty"`
	NoManageResolvConf bool                `json:"no_manage_resolv_conf,omitempty"`
	NoManageHosts      bool                `json:"no_manage_hosts,omitempty"`
	NoManageHostname   bool                `json:"no_manage_hostname,omitempty"`
	HostsFile          string              `json:"hostsFile,omitempty"`
	// CgroupParent is the cgroup under which the pod's cgroup is created.
	CgroupParent string `json:"cgroup_parent,omitempty"`
	// ResourceLimits (CPU shares, quota, period, cpuset, memory, swap,
	// pids) are written to the pod's own cgroup, which every member's
	// cgroup is nested in, so they bind the pod as a whole.
	ResourceLimits *specs.LinuxResources `json:"resource_limits,omitempty"`
	// CPUPeriod and CPUQuota are what the client derives from --cpus; they
	// repeat resource_limits.cpu's period and quota.
	CPUPeriod uint64 `json:"cpu_period,omitempty"`
	CPUQuota  int64  `json:"cpu_quota,omitempty"`
	// ThrottleReadBpsDevice (--device-read-bps) is refused: pods take no
	// block I/O limits.
	ThrottleReadBpsDevice json.RawMessage `json:"throttleReadBpsDevice,omitempty"`
	InfraConmonPidFile    string          `json:"infra_conmon_pid_file,omitempty"`
	RestartPolicy         string          `json:"restart_policy,omitempty"`
	RestartTries          *uint           `json:"restart_tries,omitempty"`
	// Devices (pod_devices, --device), Mounts and Volumes (-v, --mount)
	// are every member's, before its own, as Podman's members inherit
	// them from the infra container.
	Devices []string          `json:"pod_devices,omitempty"`
	Sysctl  map[string]string `json:"sysctl,omitempty"`
	Mounts  []specs.Mount     `json:"mounts,omitempty"`
	Volumes []NamedVolume     `json:"volumes,omitempty"`
	// OverlayVolumes (-v /src:/dst:O) become every member's bind mounts
	// with the O option: each member sees the source through an overlay
	// of its own.
	OverlayVolumes     []OverlayVolume   `json:"overlay_volumes,omitempty"`
	ImageVolumes       json.RawMessage   `json:"image_volumes,omitempty"`
	VolumesFrom        []string          `json:"volumes_from,omitempty"`
	ShmSize            *int64            `json:"shm_size,omitempty"`
	ShmSizeSystemd     *int64            `json:"shm_size_systemd,omitempty"`
	SecurityOpt        []string          `json:"security_opt,omitempty"`
	IDMappings         *IDMappingOptions `json:"idmappings,omitempty"`
	ServiceContainerID string            `json:"serviceContainerID,omitempty"`
}

// Pod is the engine's record of a pod. It is a snapshot.
type Pod struct {
	ID      string
	Name    string
	Created time.Time
	// Spec is the creation request after defaults (hostname, shared
	// namespaces, exit policy) were applied.
	Spec PodSpec
	// InfraID is the infra container ("" for a pod without one).
	InfraID string
	// CgroupParent is the cgroup the pod's cgroup lives under; CgroupPath the
	// pod's own cgroup (its members' parent), "" when members keep their own.
	CgroupParent string
	CgroupPath   string
	// CgroupSlice is the pod's systemd slice under the systemd cgroup
	// manager (CgroupPath is then its directory); "" under cgroupfs.
	CgroupSlice string `json:",omitempty"`
}

// PodMembership is what a container created in a pod takes from it.
type PodMembership struct {
	PodID   string
	PodName string
	// InfraID is the container whose namespaces the members join ("" when
	// the pod has no infra container: then nothing is shared).
	InfraID string
	// Shared lists the namespaces members join (PodShareNet ...).
	Shared []string
	// Hostname is the pod's hostname (members sharing UTS see it).
	Hostname string
	// CgroupParent is the cgroup members are created under ("" keeps the
	// engine's default).
	CgroupParent string
	// RestartPolicy and RestartTries are the pod's (--restart): the
	// policy of every member that sets none of its own.
	RestartPolicy string
	RestartTries  *uint
	// Mounts, Volumes and Devices are the pod's: every member's, before
	// its own.
	Mounts  []specs.Mount
	Volumes []NamedVolume
	Devices []specs.LinuxDevice
	// VolumesFrom (--volumes-from on the pod) are every member's too.
	VolumesFrom []string
	// Security is the confinement the pod's --security-opt gives every
	// member that asks for none of its own.
	Security PodSecurity
}

// PodSecurity is what a pod's security_opt ("apparmor=NAME",
// "seccomp=unconfined|PATH", "no-new-privileges[=true|false]",
// "label=disable") says of its members' confinement, as Podman's members
// inherit it from the infra container.
type PodSecurity struct {
	ApparmorProfile    string
	SeccompProfilePath string
	NoNewPrivs         bool
}

// ParsePodSecurity reads a pod's security_opt; an option a pod cannot
// pass on to its members is an InvalidArgument naming it.
func ParsePodSecurity(opts []string) (PodSecurity, error) {
	var sec PodSecurity
	for i, opt := range opts {
		key, value, _ := strings.Cut(opt, "=")
		switch {
		case key == "apparmor" && value != "":
			sec.ApparmorProfile = value
		case key == "seccomp" && value != "":
			sec.SeccompProfilePath = value
		case opt == "no-new-privileges" || opt == "no-new-privileges=true":
			sec.NoNewPrivs = true
		case opt == "no-new-privileges=false", opt == "label=disable":
			// What the engine does anyway: it applies no SELinux label.
		default:
			return sec, InvalidArgument(fmt.Sprintf("security_opt[%d]", i), fmt.Errorf("%q is not one a pod passes on to its members (apparmor=, seccomp=, no-new-privileges, label=disable)", opt))
		}
	}
	return sec, nil
}

// Shares reports whether the membership joins namespace ns of the infra container.
func (m *PodMembership) Shares(ns string) bool {
	if m == nil || m.InfraID == "" {
		return false
	}
	for _, s := range m.Shared {
		if s == ns {
			return true
		}
	}
	return false
}

// PodResolver is what the container backend asks of the pods backend when a
// container is created in a pod or listed.
type PodResolver interface {
	// Membership resolves a pod by name or ID (ErrNoSuchPod when unknown).
	Membership(ctx context.Context, nameOrID string) (*PodMembership, error)
	// PodName returns the name of the pod with the given ID ("" if none).
	PodName(podID string) string
}

// PodMember is one container of a pod as the pods backend sees it.
type PodMember struct {
	ID      string
	Name    string
	State   ContainerState
	IsInfra bool
	// InitType is the member's init container type ("" for a regular member).
	InitType  string
	Created   time.Time
	StartedAt time.Time
	// Networks are the networks the container is on, sorted.
	Networks []string
}

// PodContainers is what the pods backend needs of the container backend
// beyond core.Containers; the container manager implements it.
type PodContainers interface {
	// PodMembers maps each pod ID to its containers, oldest first, read in one pass.
	PodMembers() map[string][]PodMember
	// SetPods connects the resolver containers created in pods use.
	SetPods(r PodResolver)
	// Settle waits until no operation (a start, stop or restart) is
	// under way on the container.
	Settle(id string)
}

// PodContainerInfo is one container of InspectPodData.
type PodContainerInfo struct {
	ID    string `json:"Id"`
	Name  string `json:"Name"`
	State string `json:"State"`
}

// InspectPodInfraConfig is the infra part of InspectPodData.
type InspectPodInfraConfig struct {
	PortBindings       map[string][]InspectHostPort `json:"PortBindings"`
	HostNetwork        bool                         `json:"HostNetwork"`
	StaticIP           string                       `json:"StaticIP"`
	StaticMAC          string                       `json:"StaticMAC"`
	NoManageResolvConf bool                         `json:"NoManageResolvConf"`
	DNSServer          []string                     `json:"DNSServer"`
	DNSSearch          []string                     `json:"DNSSearch"`
	DNSOption          []string                     `json:"DNSOption"`
	NoManageHosts      bool                         `json:"NoManageHosts"`
	HostAdd            []string                     `json:"HostAdd"`
	Networks           []string                     `json:"Networks"`
	NetworkOptions     map[string][]string          `json:"NetworkOptions"`
	PidNS              string                       `json:"pid_ns"`
	UserNS             string                       `json:"userns"`
	UtsNS              string                       `json:"uts_ns"`
}

// InspectPodData is PodInspect's answer, with Podman's field names.
type InspectPodData struct {
	ID               string                 `json:"Id"`
	Name             string                 `json:"Name"`
	Namespace        string                 `json:"Namespace,omitempty"`
	Created          time.Time              `json:"Created"`
	CreateCommand    []string               `json:"CreateCommand,omitempty"`
	ExitPolicy       string                 `json:"ExitPolicy"`
	RestartPolicy    string                 `json:"RestartPolicy,omitempty"`
	State            string                 `json:"State"`
	Hostname         string                 `json:"Hostname"`
	Labels           map[string]string      `json:"Labels,omitempty"`
	CreateCgroup     bool                   `json:"CreateCgroup"`
	CgroupParent     string                 `json:"CgroupParent,omitempty"`
	CgroupPath       string                 `json:"CgroupPath,omitempty"`
	CreateInfra      bool                   `json:"CreateInfra"`
	InfraContainerID string                 `json:"InfraContainerID,omitempty"`
	InfraConfig      *InspectPodInfraConfig `json:"InfraConfig,omitempty"`
	SharedNamespaces []string               `json:"SharedNamespaces,omitempty"`
	NumContainers    int                    `json:"NumContainers"`
	Containers       []PodContainerInfo     `json:"Containers"`
	// Mounts and Devices are what every member gets (the pod's -v,
	// --mount and --device), as Podman shows them.
	Mounts  []InspectMount  `json:"mounts,omitempty"`
	Devices []InspectDevice `json:"devices,omitempty"`
	// The pod cgroup's limits, as Podman shows them.
	CPUPeriod   uint64 `json:"cpu_period,omitempty"`
	CPUQuota    int64  `json:"cpu_quota,omitempty"`
	CPUShares   uint64 `json:"cpu_shares,omitempty"`
	CPUSetCPUs  string `json:"cpuset_cpus,omitempty"`
	CPUSetMems  string `json:"cpuset_mems,omitempty"`
	MemoryLimit uint64 `json:"memory_limit,omitempty"`
	MemorySwap  uint64 `json:"memory_swap,omitempty"`
}

// ListPodContainer is one container of a ListPodsReport.
type ListPodContainer struct {
	ID     string `json:"Id"`
	Names  string `json:"Names"`
	Status string `json:"Status"`
}

// ListPodsReport is one entry of the pod listing, with Podman's field names.
type ListPodsReport struct {
	Cgroup     string             `json:"Cgroup"`
	Containers []ListPodContainer `json:"Containers"`
	Created    time.Time          `json:"Created"`
	ID         string             `json:"Id"`
	InfraID    string             `json:"InfraId"`
	Name       string             `json:"Name"`
	Namespace  string             `json:"Namespace"`
	Networks   []string           `json:"Networks"`
	Status     string             `json:"Status"`
	Labels     map[string]string  `json:"Labels"`
}

// PodActionReport answers start, stop, restart, kill, pause and unpause:
// the pod and one message per container that failed.
type PodActionReport struct {
	Errs []string `json:"Errs"`
	ID   string   `json:"Id"`
}

// PodRmReport answers PodDelete and is one entry of PodPrune's answer.
type PodRmReport struct {
	Err *string `json:"Err"`
	ID  string  `json:"Id"`
}

// PodStatsReport is one container of PodStats' answer, formatted as Podman does.
type PodStatsReport struct {
	CPU           string `json:"CPU"`
	MemUsage      string `json:"MemUsage"`
	MemUsageBytes string `json:"MemUsageBytes"`
	Mem           string `json:"Mem"`
	NetIO         string `json:"NetIO"`
	BlockIO       string `json:"BlockIO"`
	PIDS          string `json:"PIDS"`
	Pod           string `json:"Pod"`
	CID           string `json:"CID"`
	Name          string `json:"Name"`
}

// PodTopReport is PodTop's answer.
type PodTopReport struct {
	Processes [][]string `json:"Processes"`
	Titles    []string   `json:"Titles"`
}

// RemovePodOptions tune Pods.Remove.
type RemovePodOptions struct {
	// Force stops running containers and removes them.
	Force bool
	// Timeout is the stop timeout for Force (nil: each container's own).
	Timeout *uint
}

// Pods is the pod domain of the engine: groups of containers that share
// namespaces held by an infra container. Every nameOrID accepts a full
// name, a full ID or a unique ID prefix; an unknown one yields ErrNoSuchPod.
type Pods interface {
	Create(ctx context.Context, spec PodSpec) (string, error)
	List(ctx context.Context, filters map[string][]string) ([]ListPodsReport, error)
	Inspect(ctx context.Context, nameOrID string) (*InspectPodData, error)
	Exists(ctx context.Context, nameOrID string) (bool, error)
	// Start starts the infra container, then the others; ErrNotModified when
	// the pod is already running. A member's failure is in the report's Errs.
	Start(ctx context.Context, nameOrID string) (*PodActionReport, error)
	// Stop stops the members, then the infra container; ErrNotModified when
	// nothing runs.
	Stop(ctx context.Context, nameOrID string, timeout *uint) (*PodActionReport, error)
	Restart(ctx context.Context, nameOrID string, timeout *uint) (*PodActionReport, error)
	// Kill signals every running container; ErrStateConflict when none runs.
	Kill(ctx context.Context, nameOrID, signal string) (*PodActionReport, error)
	Pause(ctx context.Context, nameOrID string) (*PodActionReport, error)
	Unpause(ctx context.Context, nameOrID string) (*PodActionReport, error)
	// Remove removes the pod, its members and its infra container; without
	// Force a pod with running or paused containers is ErrStateConflict.
	Remove(ctx context.Context, nameOrID string, opts RemovePodOptions) (*PodRmReport, error)
	// Prune removes every pod none of whose containers runs or is paused.
	Prune(ctx context.Context) ([]PodRmReport, error)
	Top(ctx context.Context, nameOrID string, psArgs []string) (*PodTopReport, error)
	// Stats samples the running containers of the named pods (all pods when
	// all is set; both together is ErrInvalidArgument).
	Stats(ctx context.Context, all bool, namesOrIDs []string) ([]PodStatsReport, error)
}

// PodDevices are a pod's devices (pod_devices: "HOST[:CONTAINER[:PERMISSIONS]]"
// or a CDI name, as a container's devices) in a container spec's form.
func PodDevices(devices []string) []specs.LinuxDevice {
	out := make([]specs.LinuxDevice, 0, len(devices))
	for _, d := range devices {
		out = append(out, specs.LinuxDevice{Path: d})
	}
	return out
}
