// Package pods implements core.Pods: groups of containers that share the
// network, IPC and UTS (optionally PID) namespaces held by an infra
// container running catatonit. Pods are recorded in the state database; their
// state is derived from their containers, which the container backend keeps.
package pods

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/berth-project/berth/engine/internal/backend/execution/cgroups"
	"github.com/berth-project/berth/engine/internal/backend/execution/stats"
	"github.com/berth-project/berth/engine/internal/backend/execution/top"
	"github.com/berth-project/berth/engine/internal/backend/platform/state"
	"github.com/berth-project/berth/engine/internal/core"
)

// MemberIO samples and lists the processes of running containers
// (containerio.Service implements it).
type MemberIO interface {
	Stats(ctx context.Context, nameOrIDs []string) ([]stats.ContainerStats, error)
	Top(ctx context.Context, nameOrID string, psArgs []string) (*top.Result, error)
}

// InfraImages finds and builds the image infra containers run.
type InfraImages interface {
	Lookup(ctx context.Context, nameOrID string) (*core.Image, error)
	Import(ctx context.Context, rootfs io.Reader, opts core.ImportOptions) (string, error)
}

// EventSink records pod events (create, start, stop, kill, pause, unpause, remove).
type EventSink func(ctx context.Context, action, id, name string)

// Options are the dependencies of a Manager.
type Options struct {
	DB         *state.DB
	Containers core.Containers
	Members    core.PodContainers
	Images     InfraImages
	IO         MemberIO
	Events     EventSink
	Logger     *slog.Logger
	// CgroupManager is cgroupfs or systemd ("" is cgroupfs); CgroupParent
	// the default parent of pod cgroups: "/berth" under cgroupfs, a slice
	// ("berth.slice") under systemd, where each pod is a slice of its own.
	CgroupManager string
	CgroupParent  string
	// CgroupRoot is where the cgroup hierarchies are mounted ("/sys/fs/cgroup").
	CgroupRoot string
	// StateDir is the engine's run directory, where a pod's cgroup is noted
	// while the pod is created.
	StateDir string
	// Catatonit is the binary the default infra image is built from
	// ("/usr/bin/catatonit").
	Catatonit string
}

// entry is the manager's handle on one pod.
type entry struct {
	// op serialises lifecycle operations on the pod.
	op sync.Mutex
	// rec and removing are guarded by Manager.mu.
	rec      core.Pod
	removing bool
}

// Manager is the engine's pod backend.
type Manager struct {
	o      Options
	logger *slog.Logger

	mu     sync.RWMutex
	byID   map[string]*entry
	byName map[string]*entry

	// infraMu serialises building the default infra image; infraName is
	// its name once known (the binary is hashed once per engine run).
	infraMu   sync.Mutex
	infraName string

	bg          sync.WaitGroup
	unsubscribe func()
}

var (
	_ core.Pods        = (*Manager)(nil)
	_ core.PodResolver = (*Manager)(nil)
)

// Open loads the recorded pods, settles what a crash left half done (a pod
// whose infra container was never recorded), connects itself to the
// container backend and watches member exits for the stop exit policy.
func Open(ctx context.Context, o Options) (*Manager, error) {
	if o.StateDir == "" {
		return nil, errors.New("pods: the state directory is required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.CgroupManager, o.CgroupParent = cgroups.DefaultPlacement(o.CgroupManager, o.CgroupParent)
	if o.CgroupRoot == "" {
		o.CgroupRoot = "/sys/fs/cgroup"
	}
	if o.Catatonit == "" {
		o.Catatonit = "/usr/bin/catatonit"
	}
	if o.Events == nil {
		o.Events = func(context.Context, string, string, string) {}
	}
	m := &Manager{o: o, logger: o.Logger, byID: map[string]*entry{}, byName: map[string]*entry{}}
	recs, err := o.DB.ListPods(ctx)
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		var pod core.Pod
		if err := json.Unmarshal(r.Data, &pod); err != nil {
			return nil, fmt.Errorf("pod %s: decode state: %w", r.ID, err)
		}
		e := &entry{rec: pod}
		m.byID[pod.ID] = e
		m.byName[pod.Name] = e
	}
	// An engine stopped between creating an infra container and recording
	// its pod leaves the container behind: it goes.
	for podID, ctrs := range o.Members.PodMembers() {
		if _, ok := m.byID[podID]; ok {
			continue
		}
		for _, c := range ctrs {
			m.logger.Warn("removing a container of a pod that was never recorded", "pod", podID, "container", c.ID)
			if err := o.Containers.Remove(ctx, c.ID, core.RemoveContainerOptions{Force: true, WithPod: true}); err != nil && !errors.Is(err, core.ErrNoSuchContainer) {
				return nil, fmt.Errorf("pod %s: removing container %s: %w", podID, c.ID, err)
			}
		}
	}
	m.settleCgroups()
	o.Members.SetPods(m)
	m.unsubscribe = o.Containers.Subscribe(m.onContainerEvent)
	return m, nil
}

// Close stops watching container events and waits for pending exit-policy work.
func (m *Manager) Close() error {
	if m.unsubscribe != nil {
		m.unsubscribe()
	}
	m.bg.Wait()
	return nil
}

// lookup finds a pod by full name, full ID or unique ID prefix.
func (m *Manager) lookup(nameOrID string) (*entry, error) {
	if nameOrID == "" {
		return nil, fmt.Errorf("pod name or ID is empty: %w", core.ErrNoSuchPod)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if e, ok := m.byName[nameOrID]; ok && !e.removing {
		return e, nil
	}
	if e, ok := m.byID[nameOrID]; ok && !e.removing {
		return e, nil
	}
	live := func(yield func(string, *entry) bool) {
		for id, e := range m.byID {
			if !e.removing && !yield(id, e) {
				return
			}
		}
	}
	found, ok, err := core.ByIDPrefix(live, nameOrID)
	if err == nil && !ok {
		err = core.NoSuchPod(nameOrID)
	}
	return found, err
}

// snapshot copies a pod's record.
func (m *Manager) snapshot(e *entry) core.Pod {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return e.rec
}

// Membership answers the container backend for a container created in a pod.
func (m *Manager) Membership(_ context.Context, nameOrID string) (*core.PodMembership, error) {
	e, err := m.lookup(nameOrID)
	if err != nil {
		return nil, err
	}
	pod := m.snapshot(e)
	// Checked when the pod was made.
	security, _ := core.ParsePodSecurity(pod.Spec.SecurityOpt)
	return &core.PodMembership{
		PodID: pod.ID, PodName: pod.Name, InfraID: pod.InfraID,
		Shared:        append([]string(nil), pod.Spec.SharedNamespaces...),
		Hostname:      pod.Spec.Hostname,
		CgroupParent:  podMembersParent(pod),
		RestartPolicy: pod.Spec.RestartPolicy,
		RestartTries:  pod.Spec.RestartTries,
		Mounts:        pod.Spec.Mounts,
		Volumes:       pod.Spec.Volumes,
		Devices:       core.PodDevices(pod.Spec.Devices),
		VolumesFrom:   pod.Spec.VolumesFrom,
		Security:      security,
	}, nil
}

// PodName returns the name of the pod with the given ID.
func (m *Manager) PodName(podID string) string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if e, ok := m.byID[podID]; ok {
		return e.rec.Name
	}
	return ""
}

// Exists reports whether a pod exists.
func (m *Manager) Exists(_ context.Context, nameOrID string) (bool, error) {
	_, err := m.lookup(nameOrID)
	if errors.Is(err, core.ErrNoSuchPod) {
		return false, nil
	}
	return err == nil, err
}

func newID() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}
