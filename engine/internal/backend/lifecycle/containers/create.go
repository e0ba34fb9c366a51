package containers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	imgspec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/backend/execution/oci"
	"github.com/berth-project/berth/engine/internal/backend/execution/runtime"
	"github.com/berth-project/berth/engine/internal/backend/platform/state"
	"github.com/berth-project/berth/engine/internal/backend/resources/network"
	"github.com/berth-project/berth/engine/internal/core"
)

// defaultStopTimeout is the stop timeout of a container whose request sets none.
const defaultStopTimeout = 10

// Create creates a container from the request: a storage container on the
// image's top layer, its mounted rootfs, and a validated OCI spec. Nothing is
// left behind when any step fails.
func (m *Manager) Create(ctx context.Context, spec core.ContainerSpec) (string, []string, error) {
	return m.create(ctx, spec, nil)
}

// create is Create; adjust, when set, changes the record before it is first
// written (an import marks it Importing in the same write, so no kill -9
// finds the container without the mark).
func (m *Manager) create(ctx context.Context, spec core.ContainerSpec, adjust func(r *record, madeVolumes []string)) (string, []string, error) {
	// A client that goes away must not leave a change half done.
	ctx = context.WithoutCancel(ctx)
	defer m.metrics.observe("create", time.Now())
	err := spec.Validate()
	if err != nil {
		return "", nil, err
	}
	if err := foldOverlayVolumes(&spec); err != nil {
		return "", nil, err
	}
	if err := checkOverlayOptions(&spec); err != nil {
		return "", nil, err
	}
	if err := checkBindSubPaths(&spec); err != nil {
		return "", nil, err
	}
	if err := checkOnHost(&spec); err != nil {
		return "", nil, err
	}
	if err := m.resolveGPUs(&spec); err != nil {
		return "", nil, err
	}
	if err := m.checkCDI(&spec); err != nil {
		return "", nil, err
	}
	if spec.Remove && spec.RestartPolicy != "" && spec.RestartPolicy != core.RestartPolicyNo {
		return "", nil, core.InvalidArgument("restart_policy", errors.New("the --rm option conflicts with a restart policy"))
	}
	if slices.Contains(spec.Groups, core.KeepGroups) && m.rt.Name() != "crun" {
		return "", nil, core.InvalidArgument("groups", fmt.Errorf("keep-groups needs crun, which keeps the caller's supplementary groups (its %s annotation, what Podman uses); this engine runs %s, which has no way to do it", oci.KeepGroupsAnnotation, m.rt.Name()))
	}
	if spec.OCIRuntime != "" && spec.OCIRuntime != m.rt.Name() {
		return "", nil, core.InvalidArgument("oci_runtime", fmt.Errorf("the engine runs %s, not %s", m.rt.Name(), spec.OCIRuntime))
	}
	if spec.InitContainerType != "" && (spec.Pod == "" || spec.PodInfra) {
		return "", nil, core.InvalidArgument("init_container_type", errors.New("an init container must be a member of a pod"))
	}
	var pod *core.PodMembership
	if spec.Pod != "" {
		if pod, err = m.joinPod(ctx, &spec); err != nil {
			return "", nil, err
		}
		// What the pod gave every member (mounts, volumes, devices,
		// confinement) is checked with the member's own.
		if err := spec.Validate(); err != nil {
			return "", nil, err
		}
		if err := checkOnHost(&spec); err != nil {
			return "", nil, err
		}
		if err := m.checkCDI(&spec); err != nil {
			return "", nil, err
		}
	}
	if err := checkExpose(&spec); err != nil {
		return "", nil, err
	}
	img := &core.Image{}
	if spec.Rootfs == "" {
		if img, err = m.images.Lookup(ctx, spec.Image); err != nil {
			return "", nil, err
		}
		if err := core.CheckImagePlatform(spec.Image, img, spec.ImageOS, spec.ImageArch, spec.ImageVariant); err != nil {
			return "", nil, err
		}
	}
	joinsPodNet := pod != nil && !spec.PodInfra && pod.Shares(core.PodShareNet)
	if err := m.resolveNetwork(ctx, &spec, img, joinsPodNet); err != nil {
		return "", nil, err
	}
	if err := m.resolveCgroups(&spec, pod); err != nil {
		return "", nil, err
	}
	if err := m.resolveCgroupNS(&spec); err != nil {
		return "", nil, err
	}
	if err := m.resolveIPCNS(&spec); err != nil {
		return "", nil, err
	}
	if err := m.resolveJoinedNS(&spec); err != nil {
		return "", nil, err
	}
	if err := checkNamespacePaths(&spec); err != nil {
		return "", nil, err
	}
	if err := m.resolveDependencies(&spec); err != nil {
		return "", nil, err
	}
	if spec.Links, err = m.resolveLinks(spec.Links); err != nil {
		return "", nil, err
	}
	if err := m.resolveImageVolumes(ctx, &spec); err != nil {
		return "", nil, err
	}
	if err := m.checkArtifactVolumes(ctx, &spec); err != nil {
		return "", nil, err
	}
	addReadWriteTmpfs(&spec)
	if err := checkPasswdRequest(&spec); err != nil {
		return "", nil, err
	}
	if err := spec.ResolveThrottleDevices(oci.BlockDevice); err != nil {
		return "", nil, err
	}
	if spec.Hostname == "" && (spec.NetNS.NSMode == core.NetNSHost || spec.UtsNS.NSMode == core.NSHost) {
		// Like Podman: a container on the host's network is named like the
		// host; in the host's UTS namespace its /etc/hostname says the same.
		if h, err := os.Hostname(); err == nil {
			spec.Hostname = h
		}
	}
	// The image's labels that the container does not set become its own,
	// as Podman's and Docker's create do (a LABEL line of the Containerfile
	// shows in the container's inspect and matches its label filters).
	for k, v := range img.Config.Config.Labels {
		if _, set := spec.Labels[k]; set {
			continue
		}
		if spec.Labels == nil {
			spec.Labels = map[string]string{}
		}
		spec.Labels[k] = v
	}
	if spec.HealthConfig == nil && img.HealthCheck != nil && len(img.HealthCheck.Test) > 0 && img.HealthCheck.Test[0] != "NONE" {
		hc := *img.HealthCheck
		spec.HealthConfig = &hc
	}
	if _, err := oci.ProcessArgs(&spec, img.Config.Config); err != nil {
		return "", nil, err
	}
	seccompProfile, err := resolveSeccomp(&spec, img, m.host)
	if err != nil {
		return "", nil, err
	}
	if _, err := m.apparmorProfile(&spec); err != nil {
		return "", nil, err
	}

	id := newID()
	releaseSecrets, err := m.resolveSecrets(ctx, id, &spec)
	if err != nil {
		return "", nil, err
	}
	defer releaseSecrets()
	release, err := m.reserveName(&spec)
	if err != nil {
		return "", nil, err
	}
	defer release()

	// Volatile: the container's storage metadata is written without fsync
	// and its overlay is mounted "volatile". Its writable layer is scratch
	// space that a power loss may lose, like the state database's last
	// commits; an engine crash loses nothing (see docs/engine/containers.md).
	// Names live in the state database only, so a name is free again the
	// moment its container is removed, while the storage is deleted behind.
	// A --rootfs container's storage is an empty layer of no image.
	sc, err := m.createStorage(id, &spec, img.ID, pod)
	if err != nil {
		return "", nil, err
	}
	ok := false
	defer func() {
		if !ok {
			m.unmountRoot(id, &spec)
			m.unmountLayerLeftovers(id)
			m.store.DeleteContainer(sc.ID)
		}
	}()
	defer m.releaseVolumes(id)
	vols, createdVols, err := m.resolveVolumes(ctx, id, &spec, img)
	if err != nil {
		return "", nil, err
	}
	defer func() {
		if !ok {
			m.dropVolumes(ctx, id, createdVols)
		}
	}()
	bundle, static, err := m.containerDirs(id)
	if err != nil {
		return "", nil, err
	}
	given := spec.Image
	if spec.RawImageName != "" {
		given = spec.RawImageName
	}
	imageName := ""
	if spec.Rootfs == "" {
		imageName = imageNameFor(given, img)
	}
	rec := record{Container: core.Container{
		ID: id, Name: spec.Name, Created: time.Now(),
		Image: imageName, ImageID: img.ID,
		Spec:            spec,
		ImageEntrypoint: img.Config.Config.Entrypoint,
		ImageCmd:        img.Config.Config.Cmd,
		ImageEnv:        img.Config.Config.Env,
		ImageWorkDir:    img.Config.Config.WorkingDir,
		ImageStopSignal: img.Config.Config.StopSignal,
		Runtime:         m.rt.Name(),
		Bundle:          bundle,
		StaticDir:       static,
		LogPath:         filepath.Join(static, "ctr.log"),
		AttachSocket:    m.rt.AttachSocket(bundle),
		ExitFile:        m.rt.ExitFile(id),
		State:           core.StateConfigured,
	},
		ImageUser:      img.Config.Config.User,
		ImageDigest:    img.Digest,
		Volumes:        vols,
		SeccompProfile: seccompProfile,
		UIDMap:         fromStorageMaps(sc.UIDMap),
		GIDMap:         fromStorageMaps(sc.GIDMap),
	}
	m.applyPod(&rec, pod)
	if err := m.placeCgroup(&rec, pod); err != nil {
		return "", nil, err
	}
	warnings, err := m.prepare(ctx, &rec, img)
	if err != nil {
		return "", nil, err
	}
	rootUID, rootGID := hostRoot(&rec)
	if err := m.copyUp(ctx, rec.Rootfs, vols, rootUID, rootGID); err != nil {
		return "", nil, err
	}
	if adjust != nil {
		adjust(&rec, createdVols)
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return "", nil, err
	}
	m.mu.Lock()
	if holder, taken := m.byName[spec.Name]; taken {
		m.mu.Unlock()
		return "", nil, createNameInUse(spec.Name, holder.rec.ID)
	}
	err = m.db.AddContainer(ctx, state.ContainerRecord{ID: id, Name: rec.Name, State: string(rec.State), Created: rec.Created, Data: data, PodID: rec.Pod})
	if err != nil {
		m.mu.Unlock()
		if errors.Is(err, state.ErrDuplicate) {
			return "", nil, createNameInUse(spec.Name, "")
		}
		return "", nil, err
	}
	e := &entry{rec: rec, changed: make(chan struct{})}
	m.byID[id] = e
	m.byName[rec.Name] = e
	m.mu.Unlock()
	ok = true
	m.emit(ctx, core.EventCreate, rec, nil)
	return id, warnings, nil
}

// prepare mounts the rootfs (if it is not mounted), writes the generated
// /etc files and config.json. It fills rec's Rootfs, Path, Args and Mounted.
func (m *Manager) prepare(ctx context.Context, rec *record, img *core.Image) ([]string, error) {
	if !rec.Mounted {
		rootfs, err := m.mountRoot(rec.ID, &rec.Spec)
		if err != nil {
			return nil, fmt.Errorf("mount container rootfs: %w", err)
		}
		rec.Rootfs = rootfs
		rec.Mounted = true
	}
	imgCfg := imageConfigOf(rec, img)
	hostname := hostnameOf(rec)
	hosts, err := oci.HostsFile(&rec.Spec, hostname, rec.Name, "")
	if err != nil {
		return nil, err
	}
	base, err := baseHosts(rec)
	if err != nil {
		return nil, err
	}
	hosts = base + hosts
	files := map[string]string{
		"hosts":       hosts,
		"resolv.conf": oci.ResolvConf(&rec.Spec, m.hostResolv),
		"hostname":    hostname + "\n",
	}
	var tzMount []specs.Mount
	if tz := rec.Spec.Timezone; tz != "" {
		zone, err := timezoneFile(tz)
		if err != nil {
			return nil, err
		}
		files["localtime"] = string(zone)
		tzMount = append(tzMount, specs.Mount{Destination: "/etc/localtime", Type: "bind",
			Source: filepath.Join(rec.StaticDir, "localtime"), Options: []string{"bind", "rprivate", "ro"}})
	}
	if err := os.MkdirAll(rec.StaticDir, 0o700); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(rec.Bundle, 0o700); err != nil {
		return nil, err
	}
	rootUID, rootGID := hostRoot(rec)
	for name, content := range files {
		path := filepath.Join(rec.StaticDir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return nil, err
		}
		// In a user namespace they belong to the container's root, as
		// with Podman.
		if err := os.Chown(path, rootUID, rootGID); err != nil {
			return nil, err
		}
	}
	if err := makeSubPathStages(rec); err != nil {
		return nil, err
	}
	spec := volumeBinds(rec.Spec, rec.Volumes, rec.StaticDir)
	if err := applyOverlays(&spec, rec.StaticDir); err != nil {
		return nil, err
	}
	if err := applyBindSubPaths(&spec, rec.StaticDir); err != nil {
		return nil, err
	}
	extra, err := m.secretMounts(ctx, rec)
	if err != nil {
		return nil, err
	}
	initMount, err := initBinary(&spec)
	if err != nil {
		return nil, err
	}
	extra = append(extra, initMount...)
	extra = append(extra, tzMount...)
	passwdMounts, err := addPasswdEntries(rec)
	if err != nil {
		return nil, err
	}
	extra = append(extra, passwdMounts...)
	imageBinds, err := imageVolumeBinds(rec)
	if err != nil {
		return nil, err
	}
	extra = append(extra, imageBinds...)
	artifactBinds, err := m.artifactBinds(ctx, rec)
	if err != nil {
		return nil, err
	}
	extra = append(extra, artifactBinds...)
	if len(extra) > 0 {
		spec.Mounts = append(slices.Clone(spec.Mounts), extra...)
	}
	if rec.PodJoin.Hostname != "" {
		spec.Hostname = rec.PodJoin.Hostname
	}
	// A pod member sharing the network uses the infra container's hosts and
	// resolv.conf, so that the pod's DNS and host entries reach it.
	netFiles := rec.StaticDir
	joins, infra := m.joinedNamespaces(rec)
	if joins, err = m.joinCgroupNS(rec, joins); err != nil {
		return nil, err
	}
	if infra != nil && slices.Contains(rec.PodJoin.Shared, core.PodShareNet) {
		netFiles = infra.StaticDir
	}
	// A container in another's network namespace uses that container's
	// hosts and resolv.conf, as Docker and Podman share them.
	if rec.Spec.NetNS.NSMode == core.NetNSContainer {
		if de, err := m.lookup(rec.Spec.NetNS.Value); err == nil {
			netFiles = m.snapshot(de).StaticDir
		}
	}
	shm, joins, err := m.shmSource(rec, infra, joins)
	if err != nil {
		return nil, err
	}
	joins = m.joinDonorNamespaces(rec, joins)
	aaProfile, err := m.apparmorProfile(&spec)
	if err != nil {
		return nil, err
	}
	res, err := oci.Generate(oci.Input{
		ID: rec.ID, Spec: &spec, Image: imgCfg, Rootfs: rec.Rootfs,
		HostsFile:       filepath.Join(netFiles, "hosts"),
		ResolvConfFile:  filepath.Join(netFiles, "resolv.conf"),
		HostnameFile:    filepath.Join(rec.StaticDir, "hostname"),
		ShmDir:          shm,
		CgroupsPath:     ociCgroupsPath(rec),
		NetNSPath:       m.netNSPathOf(rec),
		Host:            m.host,
		JoinNamespaces:  joins,
		SeccompProfile:  rec.SeccompProfile,
		ApparmorProfile: aaProfile,
		UIDMappings:     ociMappings(rec.UIDMap),
		GIDMappings:     ociMappings(rec.GIDMap),
	})
	if err != nil {
		return nil, err
	}
	rec.Home = oci.EnvValue(res.Spec.Process.Env, "HOME")
	if rec.NoCgroup() {
		// No cgroup to apply anything to, device rules included (as
		// Podman leaves the spec's resources empty).
		res.Spec.Linux.Resources = &specs.LinuxResources{}
	}
	env, err := m.secretEnv(ctx, &spec)
	if err != nil {
		return nil, err
	}
	res.Spec.Process.Env = oci.SetEnv(res.Spec.Process.Env, env)
	res.Spec.Process.Env = oci.AddMissingEnv(res.Spec.Process.Env, m.linkEnv(ctx, rec))
	if spec.HTTPProxy {
		res.Spec.Process.Env = oci.AddMissingEnv(res.Spec.Process.Env, proxyEnv())
	}
	if spec.Init {
		res.Spec.Process.Args = append([]string{initPath, "--"}, res.Spec.Process.Args...)
	}
	gen, err := m.injectCDI(res.Spec, &spec)
	if err != nil {
		return nil, err
	}
	rec.CDIGeneration = gen
	// runc reads the CRIU configuration's name from the spec it created
	// the container with: a dump's settings can only come through it.
	setCRIUConfigAnnotation(res.Spec, rec.Bundle)
	data, err := json.Marshal(res.Spec)
	if err != nil {
		return nil, err
	}
	// config.json may hold secret environment variables: root only.
	if err := os.WriteFile(filepath.Join(rec.Bundle, "config.json"), data, 0o600); err != nil {
		return nil, err
	}
	rec.Path = res.Spec.Process.Args[0]
	rec.Args = res.Spec.Process.Args[1:]
	return res.Warnings, nil
}

// imageConfigOf rebuilds the image configuration a container needs. At
// create the image is at hand; later (init after a restart) the image may be
// gone, so the parts used are also kept in the record.
func imageConfigOf(rec *record, img *core.Image) (cfg imgspec.ImageConfig) {
	if img != nil {
		return img.Config.Config
	}
	cfg.Entrypoint = rec.ImageEntrypoint
	cfg.Cmd = rec.ImageCmd
	cfg.Env = rec.ImageEnv
	cfg.WorkingDir = rec.ImageWorkDir
	cfg.User = rec.ImageUser
	return cfg
}

// Init creates the container in the OCI runtime (conmon + runtime create).
func (m *Manager) Init(ctx context.Context, nameOrID string) error {
	// A client that goes away must not leave a change half done.
	ctx = context.WithoutCancel(ctx)
	e, rec, unlock, err := m.lockedLookup(nameOrID)
	if err != nil {
		return err
	}
	defer unlock()
	switch rec.State {
	case core.StateConfigured:
	case core.StateExited, core.StateStopped:
		m.cleanupLocked(ctx, e)
	default:
		return fmt.Errorf("container %s is %s: %w", rec.Name, rec.State, core.ErrStateConflict)
	}
	return m.initLocked(ctx, e, false)
}

// initLocked creates the container in the runtime; forStart marks the
// record StartPending (a start follows, which clears it).
func (m *Manager) initLocked(ctx context.Context, e *entry, forStart bool) error {
	rec := m.snapshot(e)
	if err := checkOnHost(&rec.Spec); err != nil {
		return err
	}
	// What it depends on runs first (a joiner's IPC donor among them).
	if err := m.ensureDependenciesRunning(ctx, &rec); err != nil {
		return err
	}
	if rec.PodJoin.InfraID != "" || joinsOthers(&rec) || m.cdiStale(&rec) || m.linksEnvOnStart(&rec) {
		// A pod member's spec names the infra process of this run (whose
		// namespaces must exist), as a joiner's names its IPC donor's; a
		// CDI device's edits are read from its spec as it is now, as
		// Podman does at each start; a link's variables carry the linked
		// container's address as it is now.
		if rec.PodJoin.InfraID != "" {
			if err := m.ensureInfraRunning(ctx, &rec); err != nil {
				return err
			}
		}
		if _, err := m.prepare(ctx, &rec, nil); err != nil {
			return err
		}
	} else if !rec.Mounted || rec.Rootfs == "" {
		if _, err := m.prepare(ctx, &rec, nil); err != nil {
			return err
		}
	} else if _, err := os.Stat(filepath.Join(rec.Bundle, "config.json")); err != nil {
		// The run directory is on tmpfs and may be gone after a reboot.
		if _, err := m.prepare(ctx, &rec, nil); err != nil {
			return err
		}
	}
	held, err := m.holdHostPorts(&rec)
	if err != nil {
		return err
	}
	defer network.ReleaseHostPorts(held)
	if err := m.mountPerRun(ctx, &rec); err != nil {
		return err
	}
	if err := m.mountVolumes(ctx, &rec); err != nil {
		m.unmountVolumes(ctx, &rec)
		unmountPerRun(rec.StaticDir)
		return err
	}
	if err := chownSources(&rec); err != nil {
		m.unmountVolumes(ctx, &rec)
		unmountPerRun(rec.StaticDir)
		return err
	}
	if err := mountOverlays(&rec); err != nil {
		m.unmountVolumes(ctx, &rec)
		unmountPerRun(rec.StaticDir)
		return err
	}
	if !netNSAfterCreate(&rec) {
		if err := m.setupNetworkLocked(ctx, e); err != nil {
			m.teardownNetworkLocked(ctx, e)
			m.unmountVolumes(ctx, &rec)
			unmountPerRun(rec.StaticDir)
			return err
		}
	}
	create := runtimeCreateOptions(&rec)
	// A pod's default infra container only holds namespaces: the engine
	// runs its catatonit itself where the spec allows.
	create.Pause = rec.IsInfra
	// undo releases what a runtime create that failed, or whose network
	// setup failed after it, leaves: whatever runc left (state dir,
	// cgroup) goes, conmon exits by itself; the container is configured
	// again, with the failure as its error.
	undo := func(err error) {
		m.rt.Delete(context.WithoutCancel(ctx), rec.ID, true)
		m.rt.Cleanup(rec.ID)
		m.unmountVolumes(ctx, &rec)
		unmountPerRun(rec.StaticDir)
		m.teardownNetworkLocked(ctx, e)
		m.update(ctx, e, func(r *record) {
			r.Rootfs, r.Mounted, r.Path, r.Args, r.CDIGeneration = rec.Rootfs, rec.Mounted, rec.Path, rec.Args, rec.CDIGeneration
			r.State = core.StateConfigured
			r.Error = err.Error()
		})
	}
	create.Held = held
	created, err := m.rt.Create(ctx, create)
	if err != nil {
		undo(err)
		var ce *runtime.CreateError
		if errors.As(err, &ce) {
			return &StartError{Name: rec.Name, Message: ce.Message}
		}
		return err
	}
	// The runtime holds its own binds of the volume parts now.
	unstageSubPaths(rec.StaticDir)
	if netNSAfterCreate(&rec) {
		// The runtime created the namespace inside the user namespace; the
		// network goes into it before the container's process starts.
		err := m.setupNetworksIn(ctx, e, nil, fmt.Sprintf("/proc/%d/ns/net", created.PID))
		if err != nil {
			undo(err)
			return err
		}
	}
	if err := m.update(ctx, e, func(r *record) {
		r.Rootfs, r.Mounted, r.Path, r.Args, r.CDIGeneration = rec.Rootfs, rec.Mounted, rec.Path, rec.Args, rec.CDIGeneration
		r.State = core.StateCreated
		r.StartPending = forStart
		if forStart {
			// A start (a restart's too) asks for it to run: a user's
			// earlier stop no longer holds, even should the start be cut
			// here.
			r.StoppedByUser = false
		}
		r.PID = created.PID
		r.ConmonPID = created.ConmonPID
		r.ConmonUnit, r.ConmonCgroup = created.ConmonUnit, created.ConmonCgroup
		r.PauseProcess = created.Pause
		r.NeedsCleanup = true
		r.Error = ""
		r.ExitCode = 0
		r.OOMKilled = false
	}); err != nil {
		return err
	}
	m.emit(ctx, core.EventInit, m.snapshot(e), nil)
	return nil
}

// StartError is a container that could not be started because the OCI
// runtime refused it (the command does not exist, a mount failed ...). The
// container stays in state created and can be removed.
type StartError struct {
	Name    string
	Message string
}

func (e *StartError) Error() string {
	return fmt.Sprintf("container %s failed to start: %s", e.Name, e.Message)
}

// addReadWriteTmpfs gives a read-only container that asks for them
// (read_write_tmpfs, which Podman 5 and 6 send for --read-only) read-write
// tmpfs at /tmp, /var/tmp and /run, with the image's content copied up, as
// Podman's do; a destination the request mounts something else at keeps
// it. podman 4.3.1 sends these mounts itself.
func addReadWriteTmpfs(spec *core.ContainerSpec) {
	if !spec.ReadOnly || spec.ReadWriteTmpfs == nil || !*spec.ReadWriteTmpfs {
		return
	}
	taken := map[string]bool{}
	for _, m := range spec.Mounts {
		taken[filepath.Clean(m.Destination)] = true
	}
	for _, v := range spec.Volumes {
		taken[filepath.Clean(v.Dest)] = true
	}
	for _, v := range spec.ImageVolumes {
		taken[filepath.Clean(v.Destination)] = true
	}
	for _, dest := range []string{"/tmp", "/var/tmp", "/run"} {
		if !taken[dest] {
			spec.Mounts = append(spec.Mounts, specs.Mount{Destination: dest, Type: "tmpfs", Source: "tmpfs",
				Options: []string{"rw", "rprivate", "nosuid", "nodev", "tmpcopyup"}})
		}
	}
}
