// Package containers implements core.Containers: containers created from
// images in containers/storage, run by conmon and runc, recorded in the
// state database. It survives engine restarts: Open reconciles every
// recorded container with the OCI runtime and conmon's exit files.
package containers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containers/storage"

	"github.com/berth-project/berth/engine/internal/backend/execution/cgroups"
	"github.com/berth-project/berth/engine/internal/backend/execution/oci"
	"github.com/berth-project/berth/engine/internal/backend/execution/runtime"
	"github.com/berth-project/berth/engine/internal/backend/platform/apparmor"
	"github.com/berth-project/berth/engine/internal/backend/platform/mounts"
	"github.com/berth-project/berth/engine/internal/backend/platform/state"
	"github.com/berth-project/berth/engine/internal/backend/platform/userns"
	"github.com/berth-project/berth/engine/internal/core"
)

// ImageSource is what the containers backend needs from the image store.
type ImageSource interface {
	Lookup(ctx context.Context, nameOrID string) (*core.Image, error)
	Storage() storage.Store
}

// Options are the dependencies of a Manager.
type Options struct {
	Images  ImageSource
	Runtime *runtime.Runtime
	DB      *state.DB
	Logger  *slog.Logger
	// CgroupManager is cgroupfs or systemd ("" is cgroupfs); CgroupParent
	// the parent of every container: a path under cgroupfs ("/berth"), a
	// slice under systemd ("berth.slice").
	CgroupManager string
	CgroupParent  string
	// Volumes creates and removes the volumes containers mount; nil
	// refuses every container that needs one.
	Volumes core.Volumes
	// Secrets gives the secrets containers consume; nil refuses every
	// container that asks for one.
	Secrets SecretSource
	// Commits stores the images CommitContainer makes; nil leaves commit
	// unsupported.
	Commits ImageCommitter
	// Networks sets up bridged containers' namespaces; nil leaves every
	// container without networks (a private namespace with loopback only).
	Networks core.ContainerNetworking
	// DefaultNetworkMode is the mode of a container that asks for none
	// (Podman's containers.conf netns): "bridge" (the default network,
	// the default) or "private" (its own namespace with loopback only).
	DefaultNetworkMode string
	// Host limits what a container may be granted; zero means DetectHost.
	Host *oci.Host
	// CDI resolves and applies the CDI devices containers ask for
	// ("vendor.com/class=name"); nil refuses every container that does.
	CDI core.CDIRegistry
	// Artifacts gives the files of the artifacts containers mount; nil
	// refuses every container that asks for one.
	Artifacts ArtifactSource
	// MaxImportSize bounds what a checkpoint archive may expand to (0:
	// sizelimit.DefaultMax).
	MaxImportSize int64
	// AppArmor is the host's AppArmor (zero: not enforced).
	AppArmor apparmor.Host
	// SubIDs are the subordinate ID ranges user namespaces take their host
	// IDs from; nil refuses every user namespace.
	SubIDs *userns.Ranges
	// SeccompDefaultPath is the file holding the engine's default seccomp
	// profile, which inspect names for a container that has it.
	SeccompDefaultPath string
	// HoldEvents queues the events of Open's reconcile (containers that
	// exited while no engine ran) and any later ones until ReleaseEvents,
	// so that subscribers registered after Open still get them.
	HoldEvents bool
}

// record is one container as the manager keeps and persists it.
type record struct {
	core.Container
	// Mounted is true while the manager holds a mount of the rootfs.
	Mounted bool `json:"Mounted,omitempty"`
	// NeedsCleanup is true from the OCI runtime's create until its state,
	// the rootfs mount and conmon's files are released after an exit.
	NeedsCleanup bool `json:"NeedsCleanup,omitempty"`
	// Checkpointing is set while CRIU dumps the container, Restoring while
	// it restores it: an engine killed meanwhile finds out at start what
	// became of the container (see reconcileCheckpointLocked).
	Checkpointing bool `json:"Checkpointing,omitempty"`
	Restoring     bool `json:"Restoring,omitempty"`
	// Importing is set from the create of an imported container until its
	// checkpoint is in place: an engine killed before then removes it at
	// start, so that no half-imported container stays.
	Importing bool `json:"Importing,omitempty"`
	// ImportVolumes are the named volumes an import's create made. A failed
	// import, or one a kill -9 cut, removes them with the container: a
	// volume that came only with the archive must not outlive it.
	ImportVolumes []string `json:"ImportVolumes,omitempty"`
	// CheckpointNets are the addresses the container had on each network
	// when it was checkpointed; a restore asks for them again.
	CheckpointNets map[string]core.PerNetworkOptions `json:"CheckpointNets,omitempty"`
	// UserMounts counts the mounts clients asked for (MountContainer).
	UserMounts int `json:"UserMounts,omitempty"`
	// CDIGeneration is the CDI registry's generation when config.json
	// got the edits of the container's CDI devices (see initLocked).
	CDIGeneration uint64 `json:"CDIGeneration,omitempty"`
	// Volumes are the volumes the container mounts, resolved at create.
	Volumes []mountedVolume `json:"Volumes,omitempty"`
	// ImageUser is the image's user, which a later init needs if the
	// image is gone (the other parts are in core.Container).
	ImageUser string `json:"ImageUser,omitempty"`
	// Home is HOME in the environment of the container's last init (its
	// user's home directory where nothing else set it); "" until the first.
	Home string `json:"Home,omitempty"`
	// ImageDigest is the digest of the image's manifest at create.
	ImageDigest string `json:"ImageDigest,omitempty"`
	// PodJoin is what a pod member takes from its pod's infra container.
	PodJoin podFields `json:"PodJoin,omitempty"`
	// UIDMap and GIDMap are the container's user namespace mappings
	// (none: the host's user namespace), as its storage got them.
	UIDMap []core.IDMap `json:"UIDMap,omitempty"`
	GIDMap []core.IDMap `json:"GIDMap,omitempty"`
	// SeccompProfile is the container's own seccomp profile, read at
	// create (nil: the default profile, or none as the spec says).
	SeccompProfile json.RawMessage `json:"SeccompProfile,omitempty"`
	// NetSetup is the network namespace as set up (addresses included),
	// from before netavark runs until the teardown; NetStatus is what
	// netavark reported for each network.
	NetSetup  *core.NetworkSetup          `json:"NetSetup,omitempty"`
	NetStatus map[string]core.StatusBlock `json:"NetStatus,omitempty"`
}

// entry is the manager's handle on one container.
type entry struct {
	// op serialises lifecycle operations on the container.
	op sync.Mutex
	// rec and changed are guarded by Manager.mu.
	rec     record
	changed chan struct{}
	removed bool
	// holds counts the engine's own users of the rootfs mount (copies in
	// and out); the mount stays while any remains. mountedForCopy is set when
	// a copy made the mount. Guarded by Manager.mu.
	holds          int
	mountedForCopy bool
	// oomSeen is set by the OOM watch of a container whose cgroup systemd
	// may remove before its exit is handled (see watchOOM).
	oomSeen atomic.Bool
	// oomWatch is the done channel of that watch.
	oomWatch atomic.Pointer[<-chan struct{}]
	// starting is set while a start runs the process and records it:
	// handleExit leaves an exit to the start meanwhile.
	starting atomic.Bool
}

// Manager is the engine's container backend.
type Manager struct {
	images     ImageSource
	commits    ImageCommitter
	volumes    core.Volumes
	secrets    SecretSource
	nets       core.ContainerNetworking
	cdi        core.CDIRegistry
	artifacts  ArtifactSource
	privateNet bool
	store      storage.Store
	rt         *runtime.Runtime
	db         *state.DB
	logger     *slog.Logger
	host       oci.Host
	// seccompDefault is the file of the default seccomp profile.
	seccompDefault string
	// subIDs are the ranges of user namespaces; idMu serialises choosing
	// a container's mappings with creating its storage.
	subIDs        *userns.Ranges
	apparmor      apparmor.Host
	idMu          sync.Mutex
	cgroupParent  string
	cgroupManager string
	hostResolv    []byte

	mu     sync.RWMutex
	byID   map[string]*entry
	byName map[string]*entry
	// reserved holds the names of containers being created (see reserveName).
	reserved map[string]bool
	// exitsPruned is when the kept exit codes were last pruned.
	exitsPruned time.Time
	// creating maps a volume name to the containers being created with it,
	// so that a volume removal or prune cannot take it from under them.
	creating map[string][]string
	// creatingSecrets maps a secret ID to the containers being created with it.
	creatingSecrets map[string][]string
	// pods resolves the pod a container is created in (SetPods).
	pods core.PodResolver
	// execs lists a container's exec sessions for inspect (SetExecSessions).
	execs core.ExecSessionLister

	hooksMu sync.RWMutex
	hooks   map[int]core.ContainerHook
	hookSeq int
	// holding queues events in held until ReleaseEvents.
	holding bool
	held    []core.ContainerEvent

	ctx    context.Context
	cancel context.CancelFunc
	bg     sync.WaitGroup
	// deleting counts storage deletions still running after a removal.
	deleting sync.WaitGroup

	metrics *metrics
	// maxImportSize bounds checkpoint archives (Options.MaxImportSize).
	maxImportSize int64
}

var _ core.Containers = (*Manager)(nil)

// Open loads every container from the database, starts watching conmon's
// exit files and reconciles each container with the OCI runtime: running
// containers stay running, ones that exited while the engine was down get
// their real exit code and are cleaned up.
func Open(ctx context.Context, o Options) (*Manager, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.CgroupManager, o.CgroupParent = cgroups.DefaultPlacement(o.CgroupManager, o.CgroupParent)
	host := oci.Host{}
	if o.Host != nil {
		host = *o.Host
	} else {
		h, err := oci.DetectHost()
		if err != nil {
			return nil, err
		}
		host = h
	}
	switch o.DefaultNetworkMode {
	case "", core.NetNSBridge, core.NetNSPrivate:
	default:
		return nil, fmt.Errorf("default network mode %q is not bridge or private", o.DefaultNetworkMode)
	}
	resolv, _ := os.ReadFile("/etc/resolv.conf")
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m := &Manager{
		images: o.Images, commits: o.Commits, volumes: o.Volumes, secrets: o.Secrets, nets: o.Networks, cdi: o.CDI, artifacts: o.Artifacts, privateNet: o.DefaultNetworkMode == core.NetNSPrivate, store: o.Images.Storage(), rt: o.Runtime, db: o.DB, logger: o.Logger,
		host: host, seccompDefault: o.SeccompDefaultPath, subIDs: o.SubIDs, apparmor: o.AppArmor, cgroupParent: o.CgroupParent, cgroupManager: o.CgroupManager, hostResolv: resolv,
		byID: map[string]*entry{}, byName: map[string]*entry{}, reserved: map[string]bool{},
		creating:        map[string][]string{},
		creatingSecrets: map[string][]string{},
		hooks:           map[int]core.ContainerHook{},
		holding:         o.HoldEvents,
		ctx:             bg, cancel: cancel,
		metrics:       newMetrics(),
		maxImportSize: o.MaxImportSize,
	}
	recs, err := o.DB.ListContainers(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	for _, r := range recs {
		var rec record
		if err := json.Unmarshal(r.Data, &rec); err != nil {
			cancel()
			return nil, fmt.Errorf("container %s: decode state: %w", r.ID, err)
		}
		// Records from before conmon's --full-attach named the link in
		// the socket directory; the socket itself was in the bundle.
		rec.AttachSocket = m.rt.AttachSocket(rec.Bundle)
		e := &entry{rec: rec, changed: make(chan struct{})}
		m.byID[rec.ID] = e
		m.byName[rec.Name] = e
	}
	if err := m.rt.WatchExits(bg, m.onExit); err != nil {
		cancel()
		return nil, err
	}
	m.removeStaleImports()
	for _, cmd := range m.rt.KillOrphans() {
		m.logger.Warn("killed a runtime command that an engine killed before left running", "command", cmd)
	}
	m.reconcile(ctx)
	m.reapOrphans()
	return m, nil
}

// Close stops the background work. Containers keep running under conmon.
func (m *Manager) Close() error {
	m.cancel()
	m.bg.Wait()
	return nil
}

// reconcile brings every record in line with what really happened while no
// engine was watching.
func (m *Manager) reconcile(ctx context.Context) {
	m.mu.RLock()
	entries := make([]*entry, 0, len(m.byID))
	for _, e := range m.byID {
		entries = append(entries, e)
	}
	m.mu.RUnlock()
	// What is mounted in the store, from the kernel's table, read once.
	mounted := map[string]bool{}
	if mps, err := mounts.Under(filepath.Join(m.store.GraphRoot(), m.store.GraphDriverName()), nil); err == nil {
		for _, mp := range mps {
			mounted[mp] = true
		}
	}
	for _, e := range entries {
		e.op.Lock()
		m.reconcileCheckpointLocked(ctx, e)
		if !m.isRemoved(e) {
			m.reconcileLocked(ctx, e, mounted)
		}
		e.op.Unlock()
	}
}

func (m *Manager) reconcileLocked(ctx context.Context, e *entry, mounted map[string]bool) {
	rec := m.snapshot(e)
	switch rec.State {
	case core.StateCreated, core.StateRunning, core.StatePaused:
		st, err := m.rt.State(ctx, rec.ID)
		if err == nil && st.Status != "stopped" {
			next := map[string]core.ContainerState{"created": core.StateCreated, "running": core.StateRunning, "paused": core.StatePaused}[st.Status]
			if next == "" {
				next = rec.State
			}
			m.update(ctx, e, func(r *record) {
				r.State = next
				r.PID = st.Pid
				if next != core.StateCreated {
					// The start ran; only its record was cut.
					r.StartPending = false
				}
			})
			if next != core.StateCreated {
				// Adopted: its OOM kills are watched again (systemd scopes).
				m.watchOOM(e)
			}
			return
		}
		if m.handleExit(ctx, e) {
			m.cleanupLocked(ctx, e)
			m.afterExitLocked(ctx, e)
			return
		}
		// Neither the runtime nor conmon knows the exit: the container is gone.
		m.update(ctx, e, func(r *record) {
			r.State = core.StateExited
			r.ExitCode = -1
			r.PID = 0
			r.FinishedAt = time.Now()
			r.Error = "the container's process disappeared while the engine was not running"
		})
		m.cleanupLocked(ctx, e)
	case core.StateExited, core.StateStopped:
		if !rec.NeedsCleanup {
			// A start (a restart policy's included) cut between the
			// runtime's create and the record of it.
			m.deleteUnrecordedCreate(ctx, rec)
		}
		// A rootfs still mounted without a client mount was held by a copy
		// the crash interrupted; a network set up for a start that never
		// got recorded is torn down.
		if rec.NeedsCleanup || (rec.Mounted && rec.UserMounts == 0) || rec.NetSetup != nil {
			m.cleanupLocked(ctx, e)
		}
		m.afterExitLocked(ctx, e)
	case core.StateConfigured:
		m.deleteUnrecordedCreate(ctx, rec)
		if rec.NetSetup != nil || (rec.Mounted && rec.UserMounts == 0 && mounted[rec.Rootfs]) {
			// A kill -9 left its network or its rootfs mount (the
			// store's count of it may include a copy or commit the kill
			// cut): the cleanup after an exit settles both.
			m.cleanupLocked(ctx, e)
		} else if rec.Mounted && !mounted[rec.Rootfs] {
			// A created container keeps its rootfs mounted from its
			// create on, and a kill -9 leaves that mount as it is. An
			// engine that stopped cleanly unmounted it with the store
			// (the store counts no mount then): the record learns it
			// here, in memory only (every start derives it again from
			// the kernel), and the next init mounts it again. No store
			// work or database write per container: a start with many
			// created containers stays fast, the first one too.
			m.mu.Lock()
			e.rec.Mounted, e.rec.Rootfs = false, ""
			m.mu.Unlock()
		}
	}
}

// deleteUnrecordedCreate deletes the runtime's container of a record that
// does not know it was created: the engine died between the runtime's
// create and the record of it. The created container (runc's init, or a
// pause process, holding its cgroup) is nobody's, and the next create of
// the ID would fail on it ("container with given ID already exists"). Its
// conmon is waited for, so that the exit file it writes for the deleted
// init cannot be taken for the exit of the container created next.
func (m *Manager) deleteUnrecordedCreate(ctx context.Context, rec record) {
	if !m.rt.Exists(rec.ID) {
		// Cut before the runtime wrote its state: a process may sit in
		// the container's cgroup all the same.
		if err := m.rt.RemoveStrayCgroup(rec.ID, rec.CgroupPath); err != nil {
			m.logger.Warn("remove the cgroup of a create cut short", "container", rec.ID, "err", err)
		}
		m.releaseSystemdUnits(ctx, &rec)
		return
	}
	if err := m.rt.Delete(ctx, rec.ID, true); err != nil {
		m.logger.Warn("delete a container the record does not know was created", "container", rec.ID, "err", err)
	}
	if data, err := os.ReadFile(filepath.Join(rec.Bundle, "conmon.pid")); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && !runtime.WaitConmonExit(pid, rec.ID, conmonExitTimeout) {
			m.logger.Warn("conmon did not exit after its container; killed it", "container", rec.ID, "pid", pid)
		}
	}
	m.rt.Cleanup(rec.ID)
	m.releaseSystemdUnits(ctx, &rec)
}

// snapshot copies a container's record.
func (m *Manager) snapshot(e *entry) record {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return copyRecord(e.rec)
}

func copyRecord(r record) record {
	out := r
	out.Health.Log = append([]core.HealthCheckLog(nil), r.Health.Log...)
	out.PodJoin.Shared = append([]string(nil), r.PodJoin.Shared...)
	if r.NetSetup != nil {
		ns := *r.NetSetup
		out.NetSetup = &ns
	}
	return out
}

// update applies fn to a container's record, persists it and wakes waiters.
func (m *Manager) update(ctx context.Context, e *entry, fn func(*record)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.removed {
		return core.NoSuchContainer(e.rec.ID)
	}
	next := copyRecord(e.rec)
	fn(&next)
	data, err := json.Marshal(next)
	if err != nil {
		return err
	}
	if err := m.db.UpdateContainer(context.WithoutCancel(ctx), state.ContainerRecord{ID: next.ID, Name: next.Name, State: string(next.State), Data: data}); err != nil {
		return fmt.Errorf("save container %s: %w", next.ID, err)
	}
	e.rec = next
	close(e.changed)
	e.changed = make(chan struct{})
	return nil
}

// lookup finds a container by full name, full ID or unique ID prefix.
// containerNameInUse is a container name taken by the container holder
// (its ID, "" when unknown), in Podman's words.
func containerNameInUse(name, holder string) error {
	if holder != "" {
		holder = " by " + holder
	}
	return fmt.Errorf("the container name %q is already in use%s. You have to remove that container to be able to reuse that name: %w", name, holder, core.ErrDuplicateName)
}

// createNameInUse is containerNameInUse as a create answers it (Podman's
// words: the storage refuses the name).
func createNameInUse(name, holder string) error {
	return fmt.Errorf("creating container storage: %w", containerNameInUse(name, holder))
}

func (m *Manager) lookup(nameOrID string) (*entry, error) {
	if nameOrID == "" {
		return nil, fmt.Errorf("container name or ID is empty: %w", core.ErrNoSuchContainer)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if e, ok := m.byName[nameOrID]; ok {
		return e, nil
	}
	if e, ok := m.byID[nameOrID]; ok {
		return e, nil
	}
	found, ok, err := core.ByIDPrefix(maps.All(m.byID), nameOrID)
	if err == nil && !ok {
		err = core.NoSuchContainer(nameOrID)
	}
	return found, err
}

// Lookup returns a snapshot of a container's record.
func (m *Manager) Lookup(ctx context.Context, nameOrID string) (*core.Container, error) {
	e, err := m.lookup(nameOrID)
	if err != nil {
		return nil, err
	}
	rec := m.snapshot(e)
	return &rec.Container, nil
}

// Exists reports whether a container exists.
func (m *Manager) Exists(ctx context.Context, nameOrID string) (bool, error) {
	_, err := m.lookup(nameOrID)
	if errors.Is(err, core.ErrNoSuchContainer) {
		return false, nil
	}
	return err == nil, err
}

// Subscribe registers a hook for container events.
func (m *Manager) Subscribe(hook core.ContainerHook) func() {
	m.hooksMu.Lock()
	defer m.hooksMu.Unlock()
	m.hookSeq++
	id := m.hookSeq
	m.hooks[id] = hook
	return func() {
		m.hooksMu.Lock()
		delete(m.hooks, id)
		m.hooksMu.Unlock()
	}
}

// emit delivers an event to every hook, in registration order.
func (m *Manager) emit(ctx context.Context, typ core.ContainerEventType, rec record, attrs map[string]string) {
	m.publish(ctx, m.containerEvent(typ, rec, attrs))
}

// emitDockerOnly records an event only Docker's stream sends.
func (m *Manager) emitDockerOnly(ctx context.Context, typ core.ContainerEventType, rec record, attrs map[string]string) {
	ev := m.containerEvent(typ, rec, attrs)
	ev.DockerOnly = true
	m.publish(ctx, ev)
}

// containerEvent is an event about rec.
func (m *Manager) containerEvent(typ core.ContainerEventType, rec record, attrs map[string]string) core.ContainerEvent {
	if rec.Pod != "" {
		withPod := map[string]string{"podId": rec.Pod}
		for k, v := range attrs {
			withPod[k] = v
		}
		attrs = withPod
	}
	ev := core.ContainerEvent{
		Type: typ, Time: time.Now(), ID: rec.ID, Name: rec.Name, Image: rec.Image,
		Labels: rec.Spec.Labels, Attributes: attrs, RawImage: rec.Spec.RawImageName,
	}
	if typ == core.EventDied {
		code := rec.ExitCode
		ev.ExitCode = &code
		if !rec.StartedAt.IsZero() && !rec.FinishedAt.Before(rec.StartedAt) {
			ran := rec.FinishedAt.Sub(rec.StartedAt)
			ev.Ran = &ran
		}
	}
	return ev
}

// publish hands ev to the hooks, or holds it until ReleaseEvents.
func (m *Manager) publish(ctx context.Context, ev core.ContainerEvent) {
	m.hooksMu.Lock()
	if m.holding {
		m.held = append(m.held, ev)
		m.hooksMu.Unlock()
		return
	}
	hooks := m.hooksLocked()
	m.hooksMu.Unlock()
	for _, h := range hooks {
		h(context.WithoutCancel(ctx), ev)
	}
}

// hooksLocked returns the hooks in registration order; hooksMu is held.
func (m *Manager) hooksLocked() []core.ContainerHook {
	ids := make([]int, 0, len(m.hooks))
	for id := range m.hooks {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	hooks := make([]core.ContainerHook, 0, len(ids))
	for _, id := range ids {
		hooks = append(hooks, m.hooks[id])
	}
	return hooks
}

// ReleaseEvents delivers the events held since Open (Options.HoldEvents),
// oldest first, to the hooks registered now, and delivers later events as
// they happen. Events emitted meanwhile queue behind the held ones.
func (m *Manager) ReleaseEvents(ctx context.Context) {
	for {
		m.hooksMu.Lock()
		batch := m.held
		m.held = nil
		if len(batch) == 0 {
			m.holding = false
			m.hooksMu.Unlock()
			return
		}
		hooks := m.hooksLocked()
		m.hooksMu.Unlock()
		for _, ev := range batch {
			for _, h := range hooks {
				h(context.WithoutCancel(ctx), ev)
			}
		}
	}
}

func newID() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

var nameAdjectives = []string{"amber", "brave", "calm", "deft", "eager", "fond", "gentle", "hardy", "keen", "lucid", "merry", "nimble", "proud", "quiet", "rapid", "steady", "tidy", "vivid", "witty", "zesty"}
var nameNouns = []string{"anchor", "beacon", "cabin", "dock", "ferry", "galley", "harbor", "jetty", "keel", "lantern", "mast", "pier", "quay", "rudder", "sail", "tide", "vessel", "wharf", "yacht", "helm"}

// reserveName claims spec.Name for a create in progress, or, when it is
// empty, picks an unused name like "steady_harbor" and claims that: the check
// and the claim are one step under the lock, so concurrent creates never get
// the same generated name. A given name that is taken is an ErrNameInUse.
// The returned release gives the claim up once the container is registered
// under its name (or the create failed).
func (m *Manager) reserveName(spec *core.ContainerSpec) (release func(), err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if spec.Name == "" {
		spec.Name = m.unusedNameLocked()
	} else if m.nameTakenLocked(spec.Name) {
		holder := ""
		if e, ok := m.byName[spec.Name]; ok {
			holder = e.rec.ID
		}
		return nil, createNameInUse(spec.Name, holder)
	}
	name := spec.Name
	m.reserved[name] = true
	return func() {
		m.mu.Lock()
		delete(m.reserved, name)
		m.mu.Unlock()
	}, nil
}

// nameTakenLocked reports whether a container has name or a create has
// reserved it; m.mu is held.
func (m *Manager) nameTakenLocked(name string) bool {
	_, taken := m.byName[name]
	return taken || m.reserved[name]
}

// unusedNameLocked picks a free generated name; m.mu is held. After 50
// draws from the word lists a number is appended, so it always ends.
func (m *Manager) unusedNameLocked() string {
	for i := 0; ; i++ {
		b := make([]byte, 3)
		rand.Read(b)
		name := nameAdjectives[int(b[0])%len(nameAdjectives)] + "_" + nameNouns[int(b[1])%len(nameNouns)]
		if i > 50 {
			name += fmt.Sprintf("%d", int(b[2])+256*(i-51))
		}
		if !m.nameTakenLocked(name) {
			return name
		}
	}
}

// paths of a container's files.
func (m *Manager) containerDirs(id string) (bundle, static string, err error) {
	bundle, err = m.store.ContainerRunDirectory(id)
	if err != nil {
		return "", "", err
	}
	static, err = m.store.ContainerDirectory(id)
	return bundle, static, err
}
