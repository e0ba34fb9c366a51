package containers

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strconv"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/backend/execution/seccomp"
	"github.com/berth-project/berth/engine/internal/core"
)

var _ core.PodContainers = (*Manager)(nil)

// SetPods connects the pods backend: containers created with a pod resolve
// it there. Without it, a creation request naming a pod is refused.
func (m *Manager) SetPods(r core.PodResolver) {
	m.mu.Lock()
	m.pods = r
	m.mu.Unlock()
}

// SetExecSessions connects the exec sessions' keeper, which inspect asks
// for a container's sessions. Without it, inspect lists none.
func (m *Manager) SetExecSessions(l core.ExecSessionLister) {
	m.mu.Lock()
	m.execs = l
	m.mu.Unlock()
}

func (m *Manager) podResolver() core.PodResolver {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.pods
}

// PodMembers maps each pod ID to its containers, oldest first.
func (m *Manager) PodMembers() map[string][]core.PodMember {
	m.mu.RLock()
	out := map[string][]core.PodMember{}
	for _, e := range m.byID {
		r := &e.rec
		if r.Pod == "" {
			continue
		}
		var nets []string
		for n := range r.Spec.Networks {
			nets = append(nets, n)
		}
		sort.Strings(nets)
		out[r.Pod] = append(out[r.Pod], core.PodMember{
			ID: r.ID, Name: r.Name, State: r.State, IsInfra: r.IsInfra, InitType: r.Spec.InitContainerType, Created: r.Created, StartedAt: r.StartedAt,
			Networks: nets,
		})
	}
	m.mu.RUnlock()
	for _, members := range out {
		sort.Slice(members, func(i, j int) bool {
			if members[i].Created.Equal(members[j].Created) {
				return members[i].ID < members[j].ID
			}
			return members[i].Created.Before(members[j].Created)
		})
	}
	return out
}

// podFields are what a container record keeps of its pod.
type podFields struct {
	// InfraID is the container whose namespaces this one joins.
	InfraID string `json:",omitempty"`
	// Shared are the namespaces joined (core.PodShareNet ...).
	Shared []string `json:",omitempty"`
	// Hostname is the pod's hostname when the UTS namespace is shared.
	Hostname string `json:",omitempty"`
}

// joinPod resolves the pod a creation request names and checks that the
// request does not configure what the container takes from the pod.
func (m *Manager) joinPod(ctx context.Context, spec *core.ContainerSpec) (*core.PodMembership, error) {
	pods := m.podResolver()
	if pods == nil {
		return nil, core.InvalidArgument("pod", errors.New("this engine has no pods"))
	}
	pm, err := pods.Membership(ctx, spec.Pod)
	if err != nil {
		return nil, err
	}
	if spec.PodInfra {
		return pm, nil
	}
	if pm.Shares(core.PodShareNet) {
		if spec.NetNS.NSMode != "" {
			return nil, core.InvalidArgument("netns", fmt.Errorf("the container joins the network of pod %s and cannot set its own network mode %q", pm.PodName, spec.NetNS.NSMode))
		}
		for field, set := range map[string]bool{"dns_server": len(spec.DNSServers) > 0, "dns_search": len(spec.DNSSearch) > 0,
			"dns_option": len(spec.DNSOptions) > 0, "hostadd": len(spec.HostAdd) > 0} {
			if set {
				return nil, core.InvalidArgument(field, fmt.Errorf("the container shares the network of pod %s: set it on the pod", pm.PodName))
			}
		}
	}
	if pm.Shares(core.PodSharePID) && spec.PidNS.NSMode != "" {
		return nil, core.InvalidArgument("pidns", fmt.Errorf("the container joins the PID namespace of pod %s and cannot set its own mode %q", pm.PodName, spec.PidNS.NSMode))
	}
	if pm.Shares(core.PodShareIPC) && (spec.IpcNS.NSMode == core.NSHost || spec.IpcNS.NSMode == core.IPCNSNone || spec.IpcNS.NSMode == core.IPCNSContainer || spec.IpcNS.NSMode == core.NSPath) {
		return nil, core.InvalidArgument("ipcns", fmt.Errorf("the container joins the IPC namespace of pod %s and cannot set its own mode %q", pm.PodName, spec.IpcNS.NSMode))
	}
	if pm.Shares(core.PodShareUTS) && (spec.UtsNS.NSMode == core.NSHost || spec.UtsNS.NSMode == core.NSContainer || spec.UtsNS.NSMode == core.NSPath) {
		return nil, core.InvalidArgument("utsns", fmt.Errorf("the container joins the UTS namespace of pod %s and cannot set its own mode %q", pm.PodName, spec.UtsNS.NSMode))
	}
	if pm.Shares(core.PodShareUTS) && spec.Hostname != "" {
		return nil, core.InvalidArgument("hostname", fmt.Errorf("the container joins the UTS namespace of pod %s, whose hostname is %q", pm.PodName, pm.Hostname))
	}
	// The pod's mounts, volumes and devices come first, as a Podman
	// member inherits the infra container's: one the member names again
	// at the same destination is a duplicate (400), as with Podman. A spec
	// that holds them already (a checkpoint's, restored into its pod)
	// does not get them twice.
	spec.Mounts = inherit(pm.Mounts, spec.Mounts, func(a, b specs.Mount) bool {
		return a.Destination == b.Destination && a.Source == b.Source && a.Type == b.Type
	})
	spec.Volumes = inherit(pm.Volumes, spec.Volumes, func(a, b core.NamedVolume) bool { return a.Dest == b.Dest && a.Name == b.Name })
	spec.Devices = inherit(pm.Devices, spec.Devices, func(a, b specs.LinuxDevice) bool { return a.Path == b.Path })
	spec.VolumesFrom = inherit(pm.VolumesFrom, spec.VolumesFrom, func(a, b string) bool { return a == b })
	// The pod's confinement, where the member asks for none of its own.
	if spec.ApparmorProfile == "" {
		spec.ApparmorProfile = pm.Security.ApparmorProfile
	}
	if spec.SeccompProfilePath == "" || spec.SeccompProfilePath == seccomp.PodmanDefaultPath && pm.Security.SeccompProfilePath != "" {
		// Podman's clients name their default profile's file when the
		// member asks for nothing.
		spec.SeccompProfilePath = pm.Security.SeccompProfilePath
	}
	spec.NoNewPrivs = spec.NoNewPrivs || pm.Security.NoNewPrivs
	// The pod's restart policy is that of every member that sets none,
	// init containers aside (they run once), as Podman's; a member
	// removed at its exit (--rm) keeps none.
	if spec.RestartPolicy == "" && spec.InitContainerType == "" && !spec.Remove && pm.RestartPolicy != "" {
		spec.RestartPolicy = pm.RestartPolicy
		if pm.RestartTries != nil {
			tries := *pm.RestartTries
			spec.RestartTries = &tries
		}
	}
	return pm, nil
}

// inherit puts what a pod gives its members before a member's own, less
// what the member has already (same reports it).
func inherit[T any](pod, own []T, same func(a, b T) bool) []T {
	if len(pod) == 0 {
		return own
	}
	out := make([]T, 0, len(pod)+len(own))
	for _, p := range pod {
		if !slices.ContainsFunc(own, func(o T) bool { return same(p, o) }) {
			out = append(out, p)
		}
	}
	return append(out, own...)
}

// applyPod records the pod membership in a new container's record.
func (m *Manager) applyPod(rec *record, pm *core.PodMembership) {
	if pm == nil {
		return
	}
	rec.Pod = pm.PodID
	rec.Spec.Pod = pm.PodID
	rec.IsInfra = rec.Spec.PodInfra
	if rec.IsInfra || pm.InfraID == "" {
		return
	}
	rec.PodJoin = podFields{InfraID: pm.InfraID, Shared: append([]string(nil), pm.Shared...)}
	if pm.Shares(core.PodShareUTS) {
		rec.PodJoin.Hostname = pm.Hostname
	}
}

// nsTypes maps a shared namespace name to its OCI type.
var nsTypes = map[string]specs.LinuxNamespaceType{
	core.PodShareNet: specs.NetworkNamespace,
	core.PodShareIPC: specs.IPCNamespace,
	core.PodShareUTS: specs.UTSNamespace,
	core.PodSharePID: specs.PIDNamespace,
}

// nsFiles names the /proc/PID/ns entry of each namespace type.
var nsFiles = map[specs.LinuxNamespaceType]string{
	specs.NetworkNamespace: "net", specs.IPCNamespace: "ipc", specs.UTSNamespace: "uts", specs.PIDNamespace: "pid",
}

// joinedNamespaces returns the namespace paths a pod member joins and the
// infra container's static directory (its hosts and resolv.conf serve the
// members sharing its network). Both are empty while the infra container
// does not run; init regenerates the spec once it does.
func (m *Manager) joinedNamespaces(rec *record) (map[specs.LinuxNamespaceType]string, *record) {
	if rec.PodJoin.InfraID == "" {
		return nil, nil
	}
	m.mu.RLock()
	infra, ok := m.byID[rec.PodJoin.InfraID]
	var snap record
	if ok {
		snap = copyRecord(infra.rec)
	}
	m.mu.RUnlock()
	if !ok {
		return nil, nil
	}
	if snap.State != core.StateRunning && snap.State != core.StatePaused || snap.PID <= 0 {
		return nil, &snap
	}
	paths := map[specs.LinuxNamespaceType]string{}
	for _, ns := range rec.PodJoin.Shared {
		if t, ok := nsTypes[ns]; ok {
			paths[t] = filepath.Join("/proc", strconv.Itoa(snap.PID), "ns", nsFiles[t])
		}
	}
	if len(rec.UIDMap) > 0 && len(snap.UIDMap) > 0 {
		// The pod's user namespace (memberIDMappings gave the member the
		// infra container's mappings): joined first, so the namespaces
		// joined beside it, which it owns, can be set up from inside.
		paths[specs.UserNamespace] = filepath.Join("/proc", strconv.Itoa(snap.PID), "ns", "user")
	}
	return paths, &snap
}

// ensureInfraRunning starts a pod member's infra container when it does not
// run, so that its namespaces exist for the member to join.
func (m *Manager) ensureInfraRunning(ctx context.Context, rec *record) error {
	if rec.PodJoin.InfraID == "" {
		return nil
	}
	infra, err := m.lookup(rec.PodJoin.InfraID)
	if err != nil {
		return fmt.Errorf("the infra container of pod %s is gone: %w", rec.Pod, core.ErrStateConflict)
	}
	st := m.snapshot(infra).State
	switch st {
	case core.StateRunning:
		return nil
	case core.StatePaused:
		return fmt.Errorf("the infra container of pod %s is paused: %w", rec.Pod, core.ErrContainerStateImproper)
	}
	err = m.Start(ctx, rec.PodJoin.InfraID)
	if err != nil && !errors.Is(err, core.ErrNotModified) {
		return fmt.Errorf("a dependency of container %s failed to start: %w", rec.Name, err)
	}
	return nil
}

// Settle waits until no operation (a start, stop or restart) is under way
// on the container: it takes and releases the container's operation lock.
func (m *Manager) Settle(id string) {
	e, err := m.lookup(id)
	if err != nil {
		return
	}
	e.op.Lock()
	//lint:ignore SA2001 a barrier: returns once the operation in progress is over.
	e.op.Unlock()
}
