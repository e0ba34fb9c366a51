// Package system implements core.System: what the engine reports about itself
// and its host, and the store consistency check.
package system

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-project/berth/engine/internal/backend/images/imagestore"
	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/shared/buildinfo"
)

// Config is what the system service reports that it cannot find out itself.
type Config struct {
	// Listen is the address the engine serves on (reported as the remote socket).
	Listen string
	// Runtime is the OCI runtime's name (runc or crun).
	Runtime string
	// VolumePath is where named volumes live.
	VolumePath string
	// Build is berth-engine's own build (version, commit, Go version);
	// zero means buildinfo.Get().
	Build buildinfo.Info
	// CountContainers counts containers by state; nil counts the store's containers as stopped.
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
	kernel := kernelVersion()
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
	dist := distribution()
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
	memTotal, memFree, swapTotal, swapFree := memory()
	built := s.builtTime()
	info := &core.Info{
		Host: core.HostInfo{
			Arch:              runtime.GOARCH,
			BuildahVersion:    "1.42.0",
			CgroupManager:     "cgroupfs",
			CgroupsVersion:    cgroupVersion(),
			CgroupControllers: cgroupControllers(),
			Conmon:            conmon,
			CPUs:              runtime.NumCPU(),
			CPUUtilization:    cpuUsage(),
			Distribution:      distribution(),
			EventLogger:       "file",
			Hostname:          hostname,
			IDMappings:        core.IDMappings{GIDMap: []core.IDMap{}, UIDMap: []core.IDMap{}},
			Kernel:            kernelVersion(),
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
			},
			SwapFree:  swapFree,
			SwapTotal: swapTotal,
			Uptime:    uptime(),
			Linkmode:  "static",
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
			Network:       []string{"bridge"},
			Log:           []string{"k8s-file"},
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
		s.conmon = component("conmon", "conmon", "/usr/bin/conmon", "/usr/libexec/podman/conmon")
		s.oci = component(s.cfg.Runtime, s.cfg.Runtime, "/usr/bin/"+s.cfg.Runtime, "/usr/sbin/"+s.cfg.Runtime)
		s.oci.Name = s.cfg.Runtime
	})
	return s.conmon, s.oci
}

// versionPattern finds a version number in a program's --version output.
var versionPattern = regexp.MustCompile(`\d+\.\d+(\.\d+)?`)

// component describes an external program: where it is and what version it says it is.
func component(name, pkg string, paths ...string) *core.ComponentInfo {
	info := &core.ComponentInfo{Package: pkg}
	path, err := exec.LookPath(name)
	if err != nil {
		for _, candidate := range paths {
			if st, err := os.Stat(candidate); err == nil && !st.IsDir() {
				path = candidate
				break
			}
		}
	}
	if path == "" {
		return info
	}
	info.Path = path
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return info
	}
	first, _, _ := strings.Cut(string(out), "\n")
	info.Version = strings.TrimSpace(first)
	if v := versionPattern.FindString(first); v != "" {
		info.Package = fmt.Sprintf("%s_%s", pkg, v)
	}
	return info
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

// kernelVersion is the running kernel's release.
func kernelVersion() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// distribution reads /etc/os-release.
func distribution() core.DistributionInfo {
	var d core.DistributionInfo
	f, err := os.Open("/etc/os-release")
	if err != nil {
		return d
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		v = strings.Trim(v, `"`)
		switch k {
		case "ID":
			d.Distribution = v
		case "VERSION_ID":
			d.Version = v
		case "VERSION_CODENAME":
			d.Codename = v
		case "VARIANT_ID":
			d.Variant = v
		}
	}
	return d
}

// memory reads total and free memory and swap from /proc/meminfo, in bytes.
func memory() (memTotal, memFree, swapTotal, swapFree int64) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		kb, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			continue
		}
		switch fields[0] {
		case "MemTotal:":
			memTotal = kb * 1024
		case "MemAvailable:":
			memFree = kb * 1024
		case "SwapTotal:":
			swapTotal = kb * 1024
		case "SwapFree:":
			swapFree = kb * 1024
		}
	}
	return
}

// cpuUsage is the CPU time split since boot, from /proc/stat.
func cpuUsage() *core.CPUUsage {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return &core.CPUUsage{}
	}
	first, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(first)
	if len(fields) < 5 || fields[0] != "cpu" {
		return &core.CPUUsage{}
	}
	var values []float64
	var total float64
	for _, f := range fields[1:] {
		v, _ := strconv.ParseFloat(f, 64)
		values = append(values, v)
		total += v
	}
	if total == 0 {
		return &core.CPUUsage{}
	}
	round := func(v float64) float64 { return float64(int(v/total*10000)) / 100 }
	return &core.CPUUsage{UserPercent: round(values[0] + values[1]), SystemPercent: round(values[2]), IdlePercent: round(values[3])}
}

// uptime is the host's uptime, formatted like Podman ("1h 2m 3.45s").
func uptime() string {
	data, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return ""
	}
	secs, err := strconv.ParseFloat(strings.Fields(string(data))[0], 64)
	if err != nil {
		return ""
	}
	d := time.Duration(secs * float64(time.Second)).Round(10 * time.Millisecond)
	return fmt.Sprintf("%dh %dm %.2fs", int(d.Hours()), int(d.Minutes())%60, float64(d%time.Minute)/float64(time.Second))
}

// cgroupVersion is "v2" on a unified hierarchy, else "v1".
func cgroupVersion() string {
	var fs unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &fs); err == nil && fs.Type == unix.CGROUP2_SUPER_MAGIC {
		return "v2"
	}
	return "v1"
}

// cgroupControllers lists the cgroup controllers available.
func cgroupControllers() []string {
	if data, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return strings.Fields(string(data))
	}
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return []string{}
	}
	out := []string{}
	for _, e := range entries {
		if e.IsDir() && !strings.Contains(e.Name(), ",") {
			if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", e.Name(), "tasks")); err == nil {
				out = append(out, e.Name())
			}
		}
	}
	return out
}
