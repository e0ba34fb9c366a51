package core

import (
	"context"
	"time"
)

// APIVersion is the libpod API version the engine claims. Podman clients only
// require a server at or above their minimum (4.0.0 for Podman 4.x); the
// engine serves routes that arrived up to Podman 5.7 (quadlets).
const APIVersion = "5.7.0"

// MinAPIVersion is the oldest libpod API version the engine answers for.
const MinAPIVersion = "4.0.0"

// CompatAPIVersion is the Docker-compatible API version the engine claims.
const CompatAPIVersion = "1.44"

// MinCompatAPIVersion is the oldest Docker-compatible API version accepted.
const MinCompatAPIVersion = "1.24"

// System reports on the engine and its host and checks its storage.
type System interface {
	// Info describes the host, the store and the engine.
	Info(ctx context.Context) (*Info, error)
	// Version describes the engine and its components.
	Version(ctx context.Context) (*VersionReport, error)
	// Check verifies the store's consistency and optionally repairs it.
	Check(ctx context.Context, opts SystemCheckOptions) (*SystemCheckReport, error)
	// DiskUsage reports the space images, containers and volumes take.
	DiskUsage(ctx context.Context) (*DiskUsageReport, error)
	// Prune removes unused pods, containers, images, networks and (with
	// Volumes) volumes, until a round removes nothing.
	Prune(ctx context.Context, opts SystemPruneOptions) (*SystemPruneReport, error)
}

// Info is the engine's description of itself, in Podman's info wire shape.
type Info struct {
	Host       HostInfo       `json:"host"`
	Store      StoreInfo      `json:"store"`
	Registries map[string]any `json:"registries"`
	Plugins    Plugins        `json:"plugins"`
	Version    EngineVersion  `json:"version"`
	// Berth is the engine's own build, beside the API version it speaks.
	Berth BerthInfo `json:"berth"`
}

// BerthComponent is berth-engine's name in version and info reports.
const BerthComponent = "Berth Engine"

// BerthInfo is what info reports about berth-engine itself.
type BerthInfo struct {
	Name       string `json:"name"`
	Version    string `json:"version"`
	Commit     string `json:"commit"`
	GoVersion  string `json:"goVersion"`
	APIVersion string `json:"apiVersion"`
}

// HostInfo describes the machine and the runtime components.
type HostInfo struct {
	Arch              string           `json:"arch"`
	BuildahVersion    string           `json:"buildahVersion"`
	CgroupManager     string           `json:"cgroupManager"`
	CgroupsVersion    string           `json:"cgroupVersion"`
	CgroupControllers []string         `json:"cgroupControllers"`
	Conmon            *ComponentInfo   `json:"conmon"`
	CPUs              int              `json:"cpus"`
	CPUUtilization    *CPUUsage        `json:"cpuUtilization"`
	Distribution      DistributionInfo `json:"distribution"`
	EventLogger       string           `json:"eventLogger"`
	Hostname          string           `json:"hostname"`
	IDMappings        IDMappings       `json:"idMappings"`
	Kernel            string           `json:"kernel"`
	LogDriver         string           `json:"logDriver"`
	MemFree           int64            `json:"memFree"`
	MemTotal          int64            `json:"memTotal"`
	NetworkBackend    string           `json:"networkBackend"`
	OCIRuntime        *ComponentInfo   `json:"ociRuntime"`
	OS                string           `json:"os"`
	RemoteSocket      *RemoteSocket    `json:"remoteSocket,omitempty"`
	ServiceIsRemote   bool             `json:"serviceIsRemote"`
	Security          SecurityInfo     `json:"security"`
	Slirp4NetNS       SlirpInfo        `json:"slirp4netns"`
	SwapFree          int64            `json:"swapFree"`
	SwapTotal         int64            `json:"swapTotal"`
	Uptime            string           `json:"uptime"`
	Linkmode          string           `json:"linkmode"`
	// CDI lists the CDI spec directories, the devices their specs offer
	// and the specs that failed to load (Berth's addition; Docker's info
	// has CDISpecDirs).
	CDI *CDIInfo `json:"cdi,omitempty"`
	// Machine is the kernel's name for the hardware (uname -m: x86_64,
	// aarch64), which Docker's info shows where Podman's shows Arch.
	Machine string `json:"-"`
}

// ComponentInfo names an external program the engine runs (conmon, runc).
type ComponentInfo struct {
	Name    string `json:"name,omitempty"`
	Package string `json:"package"`
	Path    string `json:"path"`
	Version string `json:"version"`
}

// CPUUsage is the host's CPU time split since boot, in percent.
type CPUUsage struct {
	UserPercent   float64 `json:"userPercent"`
	SystemPercent float64 `json:"systemPercent"`
	IdlePercent   float64 `json:"idlePercent"`
}

// DistributionInfo names the host's operating system distribution.
type DistributionInfo struct {
	Distribution string `json:"distribution"`
	Variant      string `json:"variant,omitempty"`
	Version      string `json:"version"`
	Codename     string `json:"codename,omitempty"`
	// PrettyName is os-release's PRETTY_NAME (Docker's info shows it).
	PrettyName string `json:"-"`
}

// IDMap is one range of a user namespace ID mapping.
type IDMap struct {
	ContainerID int `json:"container_id"`
	HostID      int `json:"host_id"`
	Size        int `json:"size"`
}

// IDMappings are the engine's user namespace mappings (none when rootful).
type IDMappings struct {
	GIDMap []IDMap `json:"gidmap"`
	UIDMap []IDMap `json:"uidmap"`
}

// RemoteSocket is where the engine listens.
type RemoteSocket struct {
	Path   string `json:"path,omitempty"`
	Exists bool   `json:"exists,omitempty"`
}

// SecurityInfo describes the security features in use.
type SecurityInfo struct {
	AppArmorEnabled     bool   `json:"apparmorEnabled"`
	DefaultCapabilities string `json:"capabilities"`
	Rootless            bool   `json:"rootless"`
	SECCOMPEnabled      bool   `json:"seccompEnabled"`
	SECCOMPProfilePath  string `json:"seccompProfilePath"`
	SELinuxEnabled      bool   `json:"selinuxEnabled"`
}

// SlirpInfo describes slirp4netns (unused by a rootful engine).
type SlirpInfo struct {
	Executable string `json:"executable"`
	Package    string `json:"package"`
	Version    string `json:"version"`
}

// StoreInfo describes the image and container store.
type StoreInfo struct {
	ConfigFile         string            `json:"configFile"`
	ContainerStore     ContainerCounts   `json:"containerStore"`
	GraphDriverName    string            `json:"graphDriverName"`
	GraphOptions       map[string]any    `json:"graphOptions"`
	GraphRoot          string            `json:"graphRoot"`
	GraphRootAllocated uint64            `json:"graphRootAllocated"`
	GraphRootUsed      uint64            `json:"graphRootUsed"`
	GraphStatus        map[string]string `json:"graphStatus"`
	ImageCopyTmpDir    string            `json:"imageCopyTmpDir"`
	ImageStore         ImageCount        `json:"imageStore"`
	RunRoot            string            `json:"runRoot"`
	VolumePath         string            `json:"volumePath"`
}

// ContainerCounts counts containers by state.
type ContainerCounts struct {
	Number  int `json:"number"`
	Paused  int `json:"paused"`
	Running int `json:"running"`
	Stopped int `json:"stopped"`
}

// ImageCount counts images.
type ImageCount struct {
	Number int `json:"number"`
}

// Plugins lists the volume, network and log drivers available.
type Plugins struct {
	Volume        []string `json:"volume"`
	Network       []string `json:"network"`
	Log           []string `json:"log"`
	Authorization []string `json:"authorization"`
}

// EngineVersion is the engine's version block of info.
type EngineVersion struct {
	APIVersion string `json:"APIVersion"`
	Version    string `json:"Version"`
	GoVersion  string `json:"GoVersion"`
	GitCommit  string `json:"GitCommit"`
	BuiltTime  string `json:"BuiltTime"`
	Built      int64  `json:"Built"`
	OsArch     string `json:"OsArch"`
	Os         string `json:"Os"`
}

// VersionReport is the version endpoint's answer, in the Docker-compatible
// shape Podman serves.
type VersionReport struct {
	Platform      struct{ Name string } `json:"Platform"`
	Components    []ComponentVersion    `json:"Components"`
	Version       string                `json:"Version"`
	APIVersion    string                `json:"ApiVersion"`
	MinAPIVersion string                `json:"MinAPIVersion"`
	GitCommit     string                `json:"GitCommit"`
	GoVersion     string                `json:"GoVersion"`
	Os            string                `json:"Os"`
	Arch          string                `json:"Arch"`
	KernelVersion string                `json:"KernelVersion"`
	Experimental  bool                  `json:"Experimental"`
	BuildTime     string                `json:"BuildTime"`
}

// ComponentVersion is one component of a VersionReport.
type ComponentVersion struct {
	Name    string            `json:"Name"`
	Version string            `json:"Version"`
	Details map[string]string `json:"Details,omitempty"`
}

// SystemCheckOptions select how thoroughly the store is checked and what may be repaired.
type SystemCheckOptions struct {
	// Quick skips the checks that read every layer's contents.
	Quick bool
	// Repair removes damaged images and layers.
	Repair bool
	// RepairLossy also removes damaged containers.
	RepairLossy bool
	// UnreferencedLayerMaximumAge: layers referenced by nothing and older than this are damaged (nil: storage's default).
	UnreferencedLayerMaximumAge *time.Duration
}

// SystemCheckReport tells what a store check found and removed, in Podman's wire shape.
type SystemCheckReport struct {
	Errors            bool                `json:"Errors"`
	Layers            map[string][]string `json:"Layers,omitempty"`
	ROLayers          map[string][]string `json:"ROLayers,omitempty"`
	RemovedLayers     []string            `json:"RemovedLayers,omitempty"`
	Images            map[string][]string `json:"Images,omitempty"`
	ROImages          map[string][]string `json:"ROImages,omitempty"`
	RemovedImages     map[string][]string `json:"RemovedImages,omitempty"`
	Containers        map[string][]string `json:"Containers,omitempty"`
	RemovedContainers map[string]string   `json:"RemovedContainers,omitempty"`
	// State lists what is wrong in the engine's state database, by object
	// ("database", "exec session ID", "volume NAME"); RepairedState what a
	// repair did about it. Berth's addition: Podman's clients ignore them.
	State         map[string][]string `json:"State,omitempty"`
	RepairedState map[string]string   `json:"RepairedState,omitempty"`
}
