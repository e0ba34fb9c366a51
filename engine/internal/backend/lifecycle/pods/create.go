package pods

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/execution/seccomp"
	"github.com/berth-project/berth/engine/internal/backend/platform/state"
	"github.com/berth-project/berth/engine/internal/core"
)

// infraImageRepo names the infra images the engine builds.
const infraImageRepo = "localhost/berth-infra"

// infraEntrypoint is what the default infra container runs: catatonit
// without a child, as PID 1 that only reaps and waits for a signal.
var infraEntrypoint = []string{"/catatonit", "-P"}

// Create records a pod, then creates its infra container (unless the
// request has none). Nothing is left behind when the infra container cannot
// be created.
func (m *Manager) Create(ctx context.Context, spec core.PodSpec) (string, error) {
	ctx = context.WithoutCancel(ctx)
	if err := normalize(&spec); err != nil {
		return "", err
	}
	id := newID()
	if spec.Name == "" {
		spec.Name = "pod_" + id[:12]
	}
	if spec.Hostname == "" && !spec.NoInfra {
		spec.Hostname = spec.Name
	}
	pod := core.Pod{ID: id, Name: spec.Name, Created: time.Now(), Spec: spec, CgroupParent: m.o.CgroupParent}
	if spec.CgroupParent != "" {
		pod.CgroupParent = spec.CgroupParent
	}
	if err := m.checkCgroupParent(spec.CgroupParent); err != nil {
		return "", err
	}
	// --volumes-from on the pod: every member mounts what these hold.
	for i, from := range spec.VolumesFrom {
		name, _, _ := strings.Cut(from, ":")
		if _, err := m.o.Containers.Lookup(ctx, name); err != nil {
			return "", core.InvalidArgument(fmt.Sprintf("volumes_from[%d]", i), err)
		}
	}
	if *spec.ShareParent {
		if err := m.placeCgroup(&pod); err != nil {
			return "", err
		}
	}
	var image string
	if !spec.NoInfra {
		var err error
		if image, err = m.infraImage(ctx, spec.InfraImage); err != nil {
			return "", err
		}
	}
	// The name is held in memory while the infra container is created (it
	// resolves the pod through Membership); the record is written once,
	// complete. Open removes infra containers whose pod was never recorded.
	e := &entry{rec: pod}
	m.mu.Lock()
	if _, taken := m.byName[pod.Name]; taken {
		m.mu.Unlock()
		return "", fmt.Errorf("failed to make pod: adding pod to state: name %q is in use: %w", pod.Name, core.ErrPodExists)
	}
	m.byID[id] = e
	m.byName[pod.Name] = e
	m.mu.Unlock()
	// The pod's cgroup is noted before it exists (Open removes the cgroup
	// of a pod never recorded) and carries the limits before any member
	// is created under it.
	undo := func() {
		if pod.InfraID != "" {
			m.o.Containers.Remove(ctx, pod.InfraID, core.RemoveContainerOptions{Force: true, WithPod: true})
		}
		if pod.CgroupPath != "" {
			m.dropPodCgroup(pod)
			m.dropCgroupNote(pod.ID)
		}
		m.forget(e)
	}
	if pod.CgroupPath != "" {
		if err := m.noteCgroup(pod.ID, podCgroupNote(pod)); err != nil {
			m.forget(e)
			return "", fmt.Errorf("pod %s: noting its cgroup: %w", pod.ID, err)
		}
		if err := m.makePodCgroup(ctx, pod); err != nil {
			undo()
			return "", err
		}
	}
	if !spec.NoInfra {
		infraID, err := m.createInfra(ctx, &pod, image)
		if err != nil {
			undo()
			return "", err
		}
		pod.InfraID = infraID
	}
	if err := m.add(ctx, &pod); err != nil {
		undo()
		return "", err
	}
	if pod.CgroupPath != "" {
		m.dropCgroupNote(pod.ID)
	}
	m.mu.Lock()
	e.rec = pod
	m.mu.Unlock()
	m.o.Events(ctx, "create", pod.ID, pod.Name)
	return id, nil
}

// add inserts a pod's record.
func (m *Manager) add(ctx context.Context, pod *core.Pod) error {
	data, err := json.Marshal(pod)
	if err != nil {
		return err
	}
	err = m.o.DB.AddPod(ctx, state.PodRecord{ID: pod.ID, Name: pod.Name, Created: pod.Created, Data: data})
	if errors.Is(err, state.ErrDuplicate) {
		return fmt.Errorf("failed to make pod: adding pod to state: name %q is in use: %w", pod.Name, core.ErrPodExists)
	}
	return err
}

// forget drops a pod that was never recorded.
func (m *Manager) forget(e *entry) {
	m.mu.Lock()
	e.removing = true
	delete(m.byID, e.rec.ID)
	if m.byName[e.rec.Name] == e {
		delete(m.byName, e.rec.Name)
	}
	m.mu.Unlock()
}

// createInfra creates the container that holds the pod's namespaces. The
// pod's network, DNS and host entries are applied to it; members sharing
// its network see them.
func (m *Manager) createInfra(ctx context.Context, pod *core.Pod, image string) (string, error) {
	s := pod.Spec
	name := s.InfraName
	if name == "" {
		name = pod.ID[:12] + "-infra"
	}
	cs := core.ContainerSpec{
		Name:     name,
		Image:    image,
		Hostname: s.Hostname,
		Labels:   s.Labels,
		ShmSize:  s.ShmSize,
		NetNS:    s.NetNS,
		PidNS:    s.PidNS,
		// The pod's network: the container backend resolves it (bridge on
		// the default network unless the request or the engine says
		// otherwise, free host ports) as for any container.
		Networks:       s.Networks,
		CNINetworks:    s.CNINetworks,
		PortMappings:   s.PortMappings,
		NetworkOptions: s.NetworkOptions,
		DNSServers:     s.DNSServers,
		DNSSearch:      s.DNSSearch,
		DNSOptions:     s.DNSOptions,
		HostAdd:        s.HostAdd,
		Pod:            pod.ID,
		PodInfra:       true,
		// The pod's user namespace, if it has one: the infra container
		// creates it (with the OCI runtime: a pause process has none) and
		// its storage holds the range, so the range lives exactly as long
		// as the pod; every member joins it with the same mappings.
		UserNS:     s.UserNS,
		IDMappings: s.IDMappings,
		// The pod's sysctls (--sysctl), in the namespaces the members
		// share, as Podman sets them on its infra container.
		Sysctl: s.Sysctl,
	}
	userNS, _ := cs.UserNSMode()
	switch {
	case len(s.InfraCommand) > 0:
		cs.Entrypoint = s.InfraCommand
	case s.InfraImage == "" && userNS != "":
		cs.Entrypoint = infraEntrypoint
	case s.InfraImage == "":
		cs.Entrypoint = infraEntrypoint
		// The engine runs its own pause process itself (see the runtime's
		// pause.go), chrooted, with no capability and no_new_privs: no
		// code but catatonit ever runs in it and nothing can exec into it.
		// A system call filter, which only runc can apply, would buy
		// nothing and cost the runtime's start-up on every pod.
		cs.SeccompProfilePath = seccomp.Unconfined
		cs.ApparmorProfile = "unconfined"
	}
	id, _, err := m.o.Containers.Create(ctx, cs)
	if err != nil {
		if errors.Is(err, core.ErrNameInUse) {
			return "", core.InvalidArgument("infra_name", fmt.Errorf("%q is in use by a container: %w", name, err))
		}
		return "", fmt.Errorf("creating the infra container: %w", err)
	}
	return id, nil
}

// InfraImage returns the engine's own infra image (catatonit in pause
// mode), building it on first use; kube play's service containers run it.
func (m *Manager) InfraImage(ctx context.Context) (string, error) {
	return m.infraImage(ctx, "")
}

// infraImage returns the image the infra container runs: the requested one,
// or the engine's own, built on first use from the host's catatonit (a
// static binary) and named after its digest, so a new catatonit gives a new image.
func (m *Manager) infraImage(ctx context.Context, requested string) (string, error) {
	if requested != "" {
		if _, err := m.o.Images.Lookup(ctx, requested); err != nil {
			if errors.Is(err, core.ErrNoSuchImage) {
				return "", core.InvalidArgument("infra_image", errors.New(err.Error()))
			}
			return "", err
		}
		return requested, nil
	}
	m.infraMu.Lock()
	defer m.infraMu.Unlock()
	if m.infraName != "" {
		if _, err := m.o.Images.Lookup(ctx, m.infraName); err == nil {
			return m.infraName, nil
		}
	}
	bin, err := os.ReadFile(m.o.Catatonit)
	if err != nil {
		return "", fmt.Errorf("infra image: reading catatonit: %w", err)
	}
	sum := sha256.Sum256(bin)
	name := infraImageRepo + ":" + hex.EncodeToString(sum[:])[:12]
	if _, err := m.o.Images.Lookup(ctx, name); err == nil {
		m.infraName = name
		return name, nil
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	if err := tw.WriteHeader(&tar.Header{Name: "catatonit", Mode: 0o755, Size: int64(len(bin)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
		return "", err
	}
	if _, err := tw.Write(bin); err != nil {
		return "", err
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	if _, err := m.o.Images.Import(ctx, &layer, core.ImportOptions{
		Reference: name,
		Changes:   []string{`ENTRYPOINT ["/catatonit", "-P"]`},
		Message:   "berth pod infra image (catatonit)",
	}); err != nil {
		return "", fmt.Errorf("building the infra image: %w", err)
	}
	m.infraName = name
	return name, nil
}
