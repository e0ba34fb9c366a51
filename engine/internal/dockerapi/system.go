package dockerapi

import (
	"errors"
	"net"
	"net/http"
	"os"
	goruntime "runtime"
	"slices"
	"strings"
	"time"

	"github.com/docker/docker/api/types"
	containertypes "github.com/docker/docker/api/types/container"
	imagetypes "github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"
	"github.com/docker/docker/api/types/swarm"
	systemtypes "github.com/docker/docker/api/types/system"
	volumetypes "github.com/docker/docker/api/types/volume"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/httpwire"
)

// ping answers GET and HEAD _ping: "OK" with the version headers clients
// negotiate from (set by versioned).
func (s *server) ping(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-cache, no-store, must-revalidate")
	h.Set("Docker-Experimental", "false")
	h.Set("Builder-Version", "1") // the classic builder: BuildKit's API is not served
	httpwire.Pong(w, r)
}

// version answers Docker's version document.
func (s *server) version(w http.ResponseWriter, r *http.Request) {
	v, err := s.deps.System.Version(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	out := types.Version{
		Platform:      struct{ Name string }{Name: "Berth Engine"},
		Version:       v.Version,
		APIVersion:    APIVersion,
		MinAPIVersion: MinAPIVersion,
		GitCommit:     v.GitCommit,
		GoVersion:     v.GoVersion,
		Os:            v.Os,
		Arch:          v.Arch,
		KernelVersion: v.KernelVersion,
		BuildTime:     v.BuildTime,
	}
	for _, c := range v.Components {
		out.Components = append(out.Components, types.ComponentVersion{Name: c.Name, Version: c.Version, Details: c.Details})
	}
	writeJSON(w, http.StatusOK, out)
}

// info answers Docker's info document from the engine's.
func (s *server) info(w http.ResponseWriter, r *http.Request) {
	in, err := s.deps.System.Info(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	host, store := in.Host, in.Store
	hostname, _ := os.Hostname()
	cs := store.ContainerStore
	out := systemtypes.Info{
		ID:                in.Berth.Name + "-" + hostname,
		Containers:        cs.Number,
		ContainersRunning: cs.Running,
		ContainersPaused:  cs.Paused,
		ContainersStopped: cs.Stopped,
		Images:            store.ImageStore.Number,
		Driver:            store.GraphDriverName,
		Plugins: systemtypes.PluginsInfo{
			Volume: in.Plugins.Volume,
			// dockerd's predefined host and none networks' drivers too.
			Network: append(slices.Clone(in.Plugins.Network), "host", "null"),
			Log:     []string{"json-file", "k8s-file"},
		},
		MemoryLimit:        true,
		SwapLimit:          true,
		CPUCfsPeriod:       true,
		CPUCfsQuota:        true,
		CPUShares:          true,
		CPUSet:             true,
		PidsLimit:          true,
		IPv4Forwarding:     true,
		SystemTime:         time.Now().Format(time.RFC3339Nano),
		LoggingDriver:      "json-file",
		CgroupDriver:       host.CgroupManager,
		CgroupVersion:      strings.TrimPrefix(host.CgroupsVersion, "v"),
		KernelVersion:      host.Kernel,
		OperatingSystem:    firstNonEmpty(host.Distribution.PrettyName, host.Distribution.Distribution+" "+host.Distribution.Version),
		OSVersion:          host.Distribution.Version,
		OSType:             host.OS,
		Architecture:       firstNonEmpty(host.Machine, host.Arch),
		IndexServerAddress: "https://index.docker.io/v1/",
		// The registries a Docker client's pull and push reach without TLS
		// verification (dockerTLSVerify), as dockerd's defaults say.
		RegistryConfig: &registry.ServiceConfig{
			InsecureRegistryCIDRs: []*registry.NetIPNet{loopbackNet("127.0.0.0/8"), loopbackNet("::1/128")},
			IndexConfigs: map[string]*registry.IndexInfo{
				"docker.io": {Name: "docker.io", Mirrors: []string{}, Secure: true, Official: true},
			},
			Mirrors: []string{},
		},
		InitBinary: "catatonit",
		// memory.oom_control: cgroup v1's alone, as dockerd reports it.
		OomKillDisable:  host.CgroupsVersion == "v1",
		NGoroutines:     goruntime.NumGoroutine(),
		NFd:             openFiles(),
		NCPU:            host.CPUs,
		MemTotal:        host.MemTotal,
		DockerRootDir:   store.GraphRoot,
		Name:            host.Hostname,
		Labels:          []string{},
		ServerVersion:   in.Berth.Version,
		DefaultRuntime:  "runc",
		Runtimes:        map[string]systemtypes.RuntimeWithStatus{},
		Swarm:           swarm.Info{LocalNodeState: swarm.LocalNodeStateInactive},
		SecurityOptions: []string{},
	}
	if host.OCIRuntime != nil {
		out.DefaultRuntime = host.OCIRuntime.Name
		out.Runtimes[host.OCIRuntime.Name] = systemtypes.RuntimeWithStatus{Runtime: systemtypes.Runtime{Path: host.OCIRuntime.Path}}
	}
	if host.CDI != nil {
		// Docker's CDISpecDirs and DiscoveredDevices (API 1.50).
		out.CDISpecDirs = host.CDI.SpecDirs
		for _, d := range host.CDI.Devices {
			out.DiscoveredDevices = append(out.DiscoveredDevices, systemtypes.DeviceInfo{Source: "cdi", ID: d.Name})
		}
	}
	if host.Security.SECCOMPEnabled {
		out.SecurityOptions = append(out.SecurityOptions, "name=seccomp,profile=default")
	}
	if host.Security.AppArmorEnabled {
		out.SecurityOptions = append(out.SecurityOptions, "name=apparmor")
	}
	writeJSON(w, http.StatusOK, out)
}

// loopbackNet is a CIDR as Docker's registry configuration lists it.
func loopbackNet(cidr string) *registry.NetIPNet {
	_, n, _ := net.ParseCIDR(cidr)
	return (*registry.NetIPNet)(n)
}

// openFiles counts the engine's open file descriptors (Docker's NFd).
func openFiles() int {
	entries, _ := os.ReadDir("/proc/self/fd")
	return len(entries)
}

// diskUsage answers Docker's system df from the engine's report.
func (s *server) diskUsage(w http.ResponseWriter, r *http.Request) {
	rep, err := s.deps.System.DiskUsage(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	out := types.DiskUsage{
		LayersSize: rep.ImagesSize,
		Images:     []*imagetypes.Summary{},
		Containers: []*containertypes.Summary{},
		Volumes:    []*volumetypes.Volume{},
		BuildCache: []*types.BuildCache{},
	}
	byID := map[string]*imagetypes.Summary{}
	for _, im := range rep.Images {
		sum := byID[im.ImageID]
		if sum == nil {
			sum = &imagetypes.Summary{
				ID: "sha256:" + im.ImageID, Created: im.Created.Unix(), Size: im.Size,
				SharedSize: im.SharedSize, Containers: int64(im.Containers),
				RepoTags: []string{}, RepoDigests: []string{}, Labels: map[string]string{},
			}
			byID[im.ImageID] = sum
			out.Images = append(out.Images, sum)
		}
		if im.Repository != "<none>" {
			sum.RepoTags = append(sum.RepoTags, im.Repository+":"+im.Tag)
		}
	}
	for _, c := range rep.Containers {
		out.Containers = append(out.Containers, &containertypes.Summary{
			ID: c.ContainerID, Names: []string{"/" + c.Names}, Image: c.Image,
			Command: strings.Join(c.Command, " "), Created: c.Created.Unix(),
			SizeRw: c.RWSize, SizeRootFs: c.Size, State: dockerState(c.Status), Status: c.Status,
		})
	}
	for _, v := range rep.Volumes {
		out.Volumes = append(out.Volumes, &volumetypes.Volume{
			Name: v.VolumeName, Driver: "local", Scope: "local", Labels: map[string]string{}, Options: map[string]string{},
			UsageData: &volumetypes.UsageData{Size: v.Size, RefCount: int64(v.Links)},
		})
	}
	writeJSON(w, http.StatusOK, out)
}

// auth answers a login check. The engine keeps no credentials (clients
// send them with each pull and push), so it accepts the login without
// contacting the registry, as Podman's compat API does.
func (s *server) auth(w http.ResponseWriter, r *http.Request) {
	var body registry.AuthConfig
	if err := decodeBody(r, &body); err != nil {
		writeError(w, err)
		return
	}
	if body.IdentityToken != "" || body.RegistryToken != "" {
		writeError(w, core.InvalidArgument("identitytoken", errors.New("token logins are not supported: give a username and password")))
		return
	}
	// dockerd asks the registry; Docker Hub where the client names none.
	host := loginRegistry(body.ServerAddress)
	cred := core.RegistryCredential{Username: body.Username, Password: body.Password}
	if err := s.deps.Transfer.CheckLogin(r.Context(), host, cred, dockerTLSVerify(host+"/x")); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, registry.AuthenticateOKBody{Status: "Login Succeeded"})
}

// loginRegistry is the registry host a login's server address names: the
// docker CLI sends a URL ("https://index.docker.io/v1/" for Docker Hub) or
// a bare host[:port].
func loginRegistry(addr string) string {
	addr = strings.TrimPrefix(strings.TrimPrefix(addr, "https://"), "http://")
	addr, _, _ = strings.Cut(addr, "/")
	switch addr {
	case "", "index.docker.io", "registry-1.docker.io", "docker.io":
		return "docker.io"
	}
	return addr
}
