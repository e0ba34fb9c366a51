package pods

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/core"
)

// Status derives a pod's state from its containers' states, as Podman
// does: any running container makes it Running (all) or Degraded (some);
// otherwise all paused is Paused, all exited Exited, some exited Stopped.
func Status(states []core.ContainerState) string {
	if len(states) == 0 {
		return core.PodStateCreated
	}
	var running, paused, stopped, created, errored int
	for _, s := range states {
		switch s {
		case core.StateRunning:
			running++
		case core.StatePaused:
			paused++
		case core.StateExited, core.StateStopped:
			stopped++
		case core.StateConfigured, core.StateCreated:
			created++
		default:
			errored++
		}
	}
	switch {
	case running > 0 && running == len(states):
		return core.PodStateRunning
	case running > 0:
		return core.PodStateDegraded
	case paused == len(states):
		return core.PodStatePaused
	case stopped == len(states):
		return core.PodStateExited
	case stopped > 0:
		return core.PodStateStopped
	case errored > 0:
		return core.PodStateErrored
	default:
		return core.PodStateCreated
	}
}

// statesOf lists the members' states, leaving init containers out as
// Podman does: one that ran to completion does not make the pod Degraded.
func statesOf(members []core.PodMember) []core.ContainerState {
	out := make([]core.ContainerState, 0, len(members))
	for _, c := range members {
		if c.InitType == "" {
			out = append(out, c.State)
		}
	}
	return out
}

// snapshots copies every pod's record, oldest first.
func (m *Manager) snapshots() []core.Pod {
	m.mu.RLock()
	out := make([]core.Pod, 0, len(m.byID))
	for _, e := range m.byID {
		if !e.removing {
			out = append(out, e.rec)
		}
	}
	m.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out
}

// List answers the pod listing; filters are ANDed across names and ORed
// within one name (labels must all match).
func (m *Manager) List(ctx context.Context, filters map[string][]string) ([]core.ListPodsReport, error) {
	match, err := compileFilters(filters)
	if err != nil {
		return nil, err
	}
	members := m.o.Members.PodMembers()
	out := []core.ListPodsReport{}
	for _, pod := range m.snapshots() {
		ctrs := members[pod.ID]
		status := Status(statesOf(ctrs))
		ok, err := match(ctx, podView{pod: &pod, ctrs: ctrs, status: status})
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		row := core.ListPodsReport{
			Cgroup: pod.CgroupParent, Created: pod.Created, ID: pod.ID, InfraID: pod.InfraID, Name: pod.Name,
			Networks: networksOf(ctrs), Status: status, Labels: pod.Spec.Labels,
			Containers: make([]core.ListPodContainer, 0, len(ctrs)),
		}
		if row.Labels == nil {
			row.Labels = map[string]string{}
		}
		for _, c := range ctrs {
			row.Containers = append(row.Containers, core.ListPodContainer{ID: c.ID, Names: c.Name, Status: c.State.String()})
		}
		out = append(out, row)
	}
	return out, nil
}

// networksOf names the networks the pod's infra container is on.
func networksOf(ctrs []core.PodMember) []string {
	for _, c := range ctrs {
		if c.IsInfra && c.Networks != nil {
			return c.Networks
		}
	}
	return []string{}
}

// Inspect describes a pod in Podman's shape.
func (m *Manager) Inspect(ctx context.Context, nameOrID string) (*core.InspectPodData, error) {
	e, err := m.lookup(nameOrID)
	if err != nil {
		return nil, err
	}
	pod := m.snapshot(e)
	ctrs := m.o.Members.PodMembers()[pod.ID]
	s := pod.Spec
	data := &core.InspectPodData{
		ID: pod.ID, Name: pod.Name, Created: pod.Created, CreateCommand: s.CreateCommand,
		ExitPolicy: s.ExitPolicy, RestartPolicy: s.RestartPolicy, State: Status(statesOf(ctrs)), Hostname: s.Hostname, Labels: s.Labels,
		CreateCgroup: pod.CgroupPath != "", CgroupParent: pod.CgroupParent, CgroupPath: pod.CgroupPath,
		CreateInfra: !s.NoInfra, InfraContainerID: pod.InfraID,
		NumContainers: len(ctrs), Containers: make([]core.PodContainerInfo, 0, len(ctrs)),
		Mounts: memberMounts(s), Devices: memberDevices(s.Devices),
	}
	if !s.NoInfra {
		data.SharedNamespaces = s.SharedNamespaces
		data.InfraConfig = &core.InspectPodInfraConfig{
			PortBindings: map[string][]core.InspectHostPort{},
			HostNetwork:  s.NetNS.NSMode == core.NetNSHost,
			DNSServer:    s.DNSServers, DNSSearch: s.DNSSearch, DNSOption: s.DNSOptions,
			HostAdd:  s.HostAdd,
			Networks: networksOf(ctrs),
			PidNS:    nsModeOf(s.PidNS), UserNS: "host", UtsNS: nsModeOf(s.UtsNS),
		}
		// A pod with a user namespace of its own shares it with every member.
		userNS := infraUserNS(&s)
		if mode, _ := userNS.UserNSMode(); mode != "" {
			data.InfraConfig.UserNS = mode
			data.SharedNamespaces = append(slices.Clone(data.SharedNamespaces), "user")
		}
		if infra, err := m.o.Containers.Lookup(ctx, pod.InfraID); err == nil {
			data.InfraConfig.PortBindings = portBindings(infra.Spec.PortMappings)
		}
	}
	for _, c := range ctrs {
		data.Containers = append(data.Containers, core.PodContainerInfo{ID: c.ID, Name: c.Name, State: c.State.String()})
	}
	inspectLimits(data, s.ResourceLimits)
	return data, nil
}

// inspectLimits shows the pod cgroup's limits in Podman's fields.
func inspectLimits(data *core.InspectPodData, r *specs.LinuxResources) {
	if r == nil {
		return
	}
	if c := r.CPU; c != nil {
		data.CPUSetCPUs, data.CPUSetMems = c.Cpus, c.Mems
		if c.Period != nil {
			data.CPUPeriod = *c.Period
		}
		if c.Quota != nil {
			data.CPUQuota = *c.Quota
		}
		if c.Shares != nil {
			data.CPUShares = *c.Shares
		}
	}
	if m := r.Memory; m != nil {
		if m.Limit != nil {
			data.MemoryLimit = uint64(*m.Limit)
		}
		if m.Swap != nil && *m.Swap > 0 {
			data.MemorySwap = uint64(*m.Swap)
		}
	}
}

func nsModeOf(ns core.Namespace) string {
	if ns.NSMode == "" {
		return "private"
	}
	return ns.NSMode
}

// portBindings shows published ports as Podman's inspect does:
// "PORT/PROTO" -> [{HostIp, HostPort}], one entry per port of a range.
func portBindings(ports []core.PortMapping) map[string][]core.InspectHostPort {
	out := map[string][]core.InspectHostPort{}
	for _, p := range ports {
		n := p.Range
		if n == 0 {
			n = 1
		}
		proto := p.Protocol
		if proto == "" {
			proto = "tcp"
		}
		for i := uint16(0); i < n; i++ {
			key := fmt.Sprintf("%d/%s", p.ContainerPort+i, proto)
			out[key] = append(out[key], core.InspectHostPort{HostIP: p.HostIP, HostPort: strconv.Itoa(int(p.HostPort + i))})
		}
	}
	return out
}

// memberMounts shows the mounts and volumes every member of a pod gets,
// in inspect's form.
func memberMounts(s core.PodSpec) []core.InspectMount {
	var out []core.InspectMount
	for _, v := range s.Volumes {
		out = append(out, core.InspectMount{Type: "volume", Name: v.Name, Destination: v.Dest, Driver: "local",
			Options: v.Options, RW: !slices.Contains(v.Options, "ro"), Propagation: "rprivate"})
	}
	for _, m := range s.Mounts {
		out = append(out, core.InspectMount{Type: m.Type, Source: m.Source, Destination: m.Destination,
			Options: m.Options, RW: !slices.Contains(m.Options, "ro"), Propagation: "rprivate"})
	}
	return out
}

// memberDevices shows the devices every member of a pod gets: host path,
// path in the container and cgroup permissions, as a container's -device
// reads them (a CDI name stands as given).
func memberDevices(devices []string) []core.InspectDevice {
	var out []core.InspectDevice
	for _, d := range devices {
		parts := strings.SplitN(d, ":", 3)
		dev := core.InspectDevice{PathOnHost: parts[0], PathInContainer: parts[0], CgroupPermissions: "rwm"}
		if len(parts) == 2 && !strings.HasPrefix(parts[1], "/") {
			// HOST:PERMISSIONS
			parts = []string{parts[0], "", parts[1]}
		}
		if len(parts) > 1 && parts[1] != "" {
			dev.PathInContainer = parts[1]
		}
		if len(parts) > 2 && parts[2] != "" {
			dev.CgroupPermissions = parts[2]
		}
		out = append(out, dev)
	}
	return out
}
