package pods

import (
	"context"
	"fmt"

	"github.com/docker/go-units"

	"github.com/berth-project/berth/engine/internal/backend/execution/top"
	"github.com/berth-project/berth/engine/internal/core"
)

// Top lists the processes of every running container of the pod, the
// infra container first, in one table. Only descriptors top knows are
// taken: unlike a container's top, a pod's runs no ps(1) in its members
// for the others (as Podman), so an unknown one is a bad argument.
func (m *Manager) Top(ctx context.Context, nameOrID string, psArgs []string) (*core.PodTopReport, error) {
	if _, err := top.ParseDescriptors(psArgs); err != nil {
		return nil, core.InvalidArgument("ps_args", err)
	}
	e, err := m.lookup(nameOrID)
	if err != nil {
		return nil, err
	}
	pod := m.snapshot(e)
	infra, others := m.split(pod.ID)
	running := runningOnly(withInfra(infra, others))
	if len(running) == 0 {
		return nil, fmt.Errorf("pod top can only be used on pods with at least one running container; %s has none: %w", pod.Name, core.ErrStateConflict)
	}
	report := &core.PodTopReport{Processes: [][]string{}}
	for _, c := range running {
		res, err := m.o.IO.Top(ctx, c.ID, psArgs)
		if err != nil {
			return nil, err
		}
		if report.Titles == nil {
			report.Titles = res.Titles
		}
		report.Processes = append(report.Processes, res.Processes...)
	}
	return report, nil
}

// Stats samples the running containers of the named pods, or of every pod.
func (m *Manager) Stats(ctx context.Context, all bool, namesOrIDs []string) ([]core.PodStatsReport, error) {
	if all && len(namesOrIDs) > 0 {
		return nil, core.InvalidArgument("all", fmt.Errorf("cannot be combined with pod names (%v)", namesOrIDs))
	}
	var pods []core.Pod
	if len(namesOrIDs) == 0 {
		pods = m.snapshots()
	}
	for _, n := range namesOrIDs {
		e, err := m.lookup(n)
		if err != nil {
			return nil, err
		}
		pods = append(pods, m.snapshot(e))
	}
	members := m.o.Members.PodMembers()
	out := []core.PodStatsReport{}
	for _, pod := range pods {
		var ids []string
		for _, c := range runningOnly(members[pod.ID]) {
			ids = append(ids, c.ID)
		}
		if len(ids) == 0 {
			continue
		}
		samples, err := m.o.IO.Stats(ctx, ids)
		if err != nil {
			return nil, err
		}
		for _, s := range samples {
			out = append(out, core.PodStatsReport{
				CPU:           fmt.Sprintf("%.2f%%", s.CPU),
				MemUsage:      humanPair(s.MemUsage, s.MemLimit, units.HumanSize),
				MemUsageBytes: humanPair(s.MemUsage, s.MemLimit, units.BytesSize),
				Mem:           fmt.Sprintf("%.2f%%", s.MemPerc),
				NetIO:         humanPair(s.NetInput, s.NetOutput, units.HumanSize),
				BlockIO:       humanPair(s.BlockInput, s.BlockOutput, units.HumanSize),
				PIDS:          fmt.Sprint(s.PIDs),
				Pod:           pod.ID[:12],
				CID:           s.ContainerID[:12],
				Name:          s.Name,
			})
		}
	}
	return out, nil
}

// humanPair writes "a / b" in the given units, or "-- / --" when both are
// zero, as podman pod stats shows them.
func humanPair(a, b uint64, format func(float64) string) string {
	if a == 0 && b == 0 {
		return "-- / --"
	}
	return format(float64(a)) + " / " + format(float64(b))
}
