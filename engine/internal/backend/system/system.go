// Package system implements core.System: what the engine reports about itself
// and its host (version, info) and the operations over every store (disk
// usage, prune, check). It is the floor above the stores it composes: it
// reads the image store and the state database itself, reaches containers,
// volumes and the pruners through core's interfaces, and takes the host's
// facts from platform/host. No backend imports it; the engine assembles it.
package system

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-project/berth/engine/internal/backend/execution/cgroups"
	"github.com/berth-project/berth/engine/internal/backend/execution/seccomp"
	"github.com/berth-project/berth/engine/internal/backend/images/imagestore"
	"github.com/berth-project/berth/engine/internal/backend/platform/host"
	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/shared/buildinfo"
)

// Config is what the system service reports that it cannot find out itself.
type Config struct {
	// Listen is the address the engine serves on (reported as the remote socket).
	Listen string
	// Runtime is the OCI runtime's name (runc or crun).
	Runtime string
	// CgroupManager is systemd or cgroupfs ("" reports cgroupfs).
	CgroupManager string
	// VolumePath is where named volumes live.
	VolumePath string
	// Build is berth-engine's own build (version, commit, Go version);
	// zero means buildinfo.Get().
	Build buildinfo.Info
	// CountContainers counts containers by state (the engine passes the
	// containers manager's Count); nil counts the store's containers as
	// stopped, for tools without a containers backend.
	CountContainers func(ctx context.Context) (core.ContainerCounts, error)
	// Containers and Volumes are listed by disk usage (nil: none reported);
	// VolumeUsers tells which containers use a volume.
	Containers  core.Containers
	Volumes     core.Volumes
	VolumeUsers core.VolumeUsers
	// Pruners are what system prune runs, kind by kind.
	Pruners core.Pruners
	// State is the state database the check examines (nil: not checked).
	State StateDB
	// CDI lists the CDI devices containers may ask for (nil: none).
	CDI core.CDIRegistry
	// SeccompProfilePath is the file of the default seccomp profile.
	SeccompProfilePath string
	// AppArmorEnabled: the host enforces AppArmor and the engine applies it.
	AppArmorEnabled bool
	// LogDrivers are the log drivers the host offers (nil: k8s-file).
	LogDrivers []string
}

// Service implements core.System.
type Service struct {
	store   *imagestore.Store
	cfg     Config
	started time.Time

	// components are looked up once: their versions do not change while the engine runs.
	componentsOnce sync.Once
	conmon, oci    *core.ComponentInfo
}

// New builds the system service over the image store.
func New(store *imagestore.Store, cfg Config) *Service {
	if cfg.Runtime == "" {
		cfg.Runtime = "runc"
	}
	if cfg.Build.Version == "" {
		cfg.Build = buildinfo.Get()
	}
	return &Service{store: store, cfg: cfg, started: time.Now()}
}

// Version implements core.System.
func (s *Service) Version(ctx context.Context) (*core.VersionReport, error) {
	kernel := host.KernelVersion()
	built := s.builtTime()
	conmon, oci := s.components()
	report := &core.VersionReport{
		Version:       core.APIVersion,
		APIVersion:    core.CompatAPIVersion,
		MinAPIVersion: core.MinCompatAPIVersion,
		GitCommit:     s.gitCommit(),
		GoVersion:     runtime.Version(),
		Os:            runtime.GOOS,
		Arch:          runtime.GOARCH,
		KernelVersion: kernel,
		BuildTime:     built.Format(time.RFC3339),
	}
	dist := host.Distribution()
	report.Platform.Name = fmt.Sprintf("%s/%s/%s-%s", runtime.GOOS, runtime.GOARCH, dist.Distribution, dist.Version)
	report.Components = []core.ComponentVersion{
		{
			Name:    "Podman Engine",
			Version: core.APIVersion,
			Details: map[string]string{
				"APIVersion":    core.APIVersion,
				"Arch":          runtime.GOARCH,
				"BuildTime":     built.Format(time.RFC3339),
				"Experimental":  "false",
				"GitCommit":     s.gitCommit(),
				"GoVersion":     runtime.Version(),
				"KernelVersion": kernel,
				"MinAPIVersion": core.MinAPIVersion,
				"Os":            runtime.GOOS,
				"BerthVersion":  s.cfg.Build.Version,
				"BerthCommit":   s.cfg.Build.Commit,
			},
		},
		// Berth's own name, version and commit, beside the API version it speaks.
		{
			Name:    core.BerthComponent,
			Version: s.cfg.Build.Version,
			Details: map[string]string{
				"Commit":     s.cfg.Build.Commit,
				"GoVersion":  s.cfg.Build.GoVersion,
				"APIVersion": core.APIVersion,
			},
		},
		{Name: "Conmon", Version: conmon.Version, Details: map[string]string{"Package": conmon.Package}},
		{Name: fmt.Sprintf("OCI Runtime (%s)", oci.Name), Version: oci.Version, Details: map[string]string{"Package": oci.Package}},
	}
	return report, nil
}

// Info implements core.System.
func (s *Service) Info(ctx context.Context) (*core.Info, error) {
	st := s.store.Storage()
	images, err := st.Images()
	if err != nil {
		return nil, fmt.Errorf("counting images: %w", err)
	}
	var counts core.ContainerCounts
	if s.cfg.CountContainers != nil {
		if counts, err = s.cfg.CountContainers(ctx); err != nil {
			return nil, fmt.Errorf("counting containers: %w", err)
		}
	} else {
		containers, err := st.Containers()
		if err != nil {
			return nil, fmt.Errorf("counting containers: %w", err)
		}
		counts = core.ContainerCounts{Number: len(containers), Stopped: len(containers)}
	}
	status := map[string]string{}
	if pairs, err := st.Status(); err == nil {
		for _, pair := range pairs {
			status[pair[0]] = pair[1]
		}
	}
	graphOptions := map[string]any{}
	for _, opt := range st.GraphOptions() {
		if k, v, ok := strings.Cut(opt, "="); ok {
			graphOptions[k] = v
		}
	}
	var fs unix.Statfs_t
	var allocated, used uint64
	if err := unix.Statfs(st.GraphRoot(), &fs); err == nil {
		allocated = fs.Blocks * uint64(fs.Bsize)
		used = (fs.Blocks - fs.Bfree) * uint64(fs.Bsize)
	}
	conmon, oci := s.components()
	hostname, _ := os.Hostname()
	memTotal, memFree, swapTotal, swapFree := host.Memory()
	built := s.builtTime()
	info := &core.Info{
		Host: core.HostInfo{
			Arch:              runtime.GOARCH,
			BuildahVersion:    "1.42.0",
			CgroupManager:     s.cgroupManager(),
			CgroupsVersion:    cgroups.Host().Version(),
			CgroupControllers: cgroups.Host().Controllers(),
			Conmon:            conmon,
			CPUs:              runtime.NumCPU(),
			CPUUtilization:    host.CPUUsage(),
			Distribution:      host.Distribution(),
			EventLogger:       "file",
			Hostname:          hostname,
			IDMappings:        core.IDMappings{GIDMap: []core.IDMap{}, UIDMap: []core.IDMap{}},
			Kernel:            host.KernelVersion(),
			Machine:           host.Machine(),
			LogDriver:         "k8s-file",
			MemFree:           memFree,
			MemTotal:          memTotal,
			NetworkBackend:    "netavark",
			OCIRuntime:        oci,
			OS:                runtime.GOOS,
			RemoteSocket:      &core.RemoteSocket{Path: s.cfg.Listen, Exists: true},
			ServiceIsRemote:   true,
			Security: core.SecurityInfo{
				DefaultCapabilities: "CAP_CHOWN,CAP_DAC_OVERRIDE,CAP_FOWNER,CAP_FSETID,CAP_KILL,CAP_NET_BIND_SERVICE,CAP_SETFCAP,CAP_SETGID,CAP_SETPCAP,CAP_SETUID,CAP_SYS_CHROOT",
				Rootless:            os.Geteuid() != 0,
				SECCOMPEnabled:      seccomp.Supported(),
				AppArmorEnabled:     s.cfg.AppArmorEnabled,
				SECCOMPProfilePath:  s.cfg.SeccompProfilePath,
			},
			SwapFree:  swapFree,
			SwapTotal: swapTotal,
			Uptime:    host.Uptime(),
			Linkmode:  "static",
			CDI:       s.cdiInfo(ctx),
		},
		Store: core.StoreInfo{
			ConfigFile:         s.store.RegistriesConf(),
			ContainerStore:     counts,
			GraphDriverName:    st.GraphDriverName(),
			GraphOptions:       graphOptions,
			GraphRoot:          st.GraphRoot(),
			GraphRootAllocated: allocated,
			GraphRootUsed:      used,
			GraphStatus:        status,
			ImageCopyTmpDir:    s.store.SystemContext().BigFilesTemporaryDir,
			ImageStore:         core.ImageCount{Number: len(images)},
			RunRoot:            st.RunRoot(),
			VolumePath:         s.cfg.VolumePath,
		},
		Registries: map[string]any{"search": s.store.SearchRegistries()},
		Plugins: core.Plugins{
			Volume:        []string{"local"},
			Network:       []string{"bridge", "macvlan"},
			Log:           s.cfg.logDrivers(),
			Authorization: nil,
		},
		Version: core.EngineVersion{
			APIVersion: core.APIVersion,
			Version:    core.APIVersion,
			GoVersion:  runtime.Version(),
			GitCommit:  s.gitCommit(),
			BuiltTime:  built.Format(time.ANSIC),
			Built:      built.Unix(),
			OsArch:     runtime.GOOS + "/" + runtime.GOARCH,
			Os:         runtime.GOOS,
		},
		Berth: core.BerthInfo{
			Name:       core.BerthComponent,
			Version:    s.cfg.Build.Version,
			Commit:     s.cfg.Build.Commit,
			GoVersion:  s.cfg.Build.GoVersion,
			APIVersion: core.APIVersion,
		},
	}
	return info, nil
}

// components looks up conmon and the OCI runtime once.
func (s *Service) components() (*core.ComponentInfo, *core.ComponentInfo) {
	s.componentsOnce.Do(func() {
		s.conmon = host.Component("conmon", "conmon", "/usr/bin/conmon", "/usr/libexec/podman/conmon")
		s.oci = host.Component(s.cfg.Runtime, s.cfg.Runtime, "/usr/bin/"+s.cfg.Runtime, "/usr/sbin/"+s.cfg.Runtime)
		s.oci.Name = s.cfg.Runtime
	})
	return s.conmon, s.oci
}

// builtTime is the modification time of the engine binary.
func (s *Service) builtTime() time.Time {
	if exe, err := os.Executable(); err == nil {
		if st, err := os.Stat(exe); err == nil {
			return st.ModTime().UTC().Truncate(time.Second)
		}
	}
	return s.started.UTC().Truncate(time.Second)
}

// gitCommit is the engine's commit for Podman's GitCommit fields, empty
// when the build does not know it.
func (s *Service) gitCommit() string {
	if s.cfg.Build.Commit == "unknown" {
		return ""
	}
	return s.cfg.Build.Commit
}

// cdiInfo is what the CDI registry offers, re-read where specs changed.
func (s *Service) cdiInfo(ctx context.Context) *core.CDIInfo {
	if s.cfg.CDI == nil {
		return nil
	}
	info := s.cfg.CDI.Info(ctx)
	return &info
}

// logDrivers are the log drivers info lists.
func (c Config) logDrivers() []string {
	if len(c.LogDrivers) == 0 {
		return []string{core.LogDriverK8sFile}
	}
	return c.LogDrivers
}

// cgroupManager is the engine's cgroup manager, as info reports it.
func (s *Service) cgroupManager() string {
	if s.cfg.CgroupManager == "" {
		return "cgroupfs"
	}
	return s.cfg.CgroupManager
}
