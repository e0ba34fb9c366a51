package system

import (
	"context"
	"fmt"

	"github.com/berth-project/berth/engine/internal/core"
)

// pruneFilters are the filters system prune accepts: the ones every kind it
// prunes understands.
var pruneFilters = map[string]bool{"label": true, "label!": true, "until": true}

// Prune implements core.System as Podman does: pods, containers, images
// and (with Volumes) volumes, round after round until a round removes
// nothing (a pruned container can leave an image or volume unused), then
// networks. Each kind runs through its backend's own prune; a kind the
// engine does not have is skipped.
func (s *Service) Prune(ctx context.Context, opts core.SystemPruneOptions) (*core.SystemPruneReport, error) {
	for name := range opts.Filters {
		if !pruneFilters[name] {
			return nil, core.InvalidArgument("filters", fmt.Errorf("%q is not a system prune filter (label, label!, until)", name))
		}
	}
	p := s.cfg.Pruners
	report := &core.SystemPruneReport{
		PodPruneReport:        []*core.PodPruneReport{},
		ContainerPruneReports: []*core.PruneReport{},
		ImagePruneReports:     []*core.PruneReport{},
		NetworkPruneReports:   []*core.NetworkPruneReport{},
		VolumePruneReports:    []*core.PruneReport{},
	}
	collect := func(dst *[]*core.PruneReport, reports []core.PruneReport) bool {
		for i := range reports {
			*dst = append(*dst, &reports[i])
			if reports[i].Err == "" {
				report.ReclaimedSpace += reports[i].Size
			}
		}
		return len(reports) > 0
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		found := false
		if p.Pods != nil {
			pods, err := p.Pods(ctx)
			if err != nil {
				return nil, fmt.Errorf("pruning pods: %w", err)
			}
			report.PodPruneReport = append(report.PodPruneReport, pods...)
			found = found || len(pods) > 0
		}
		if p.Containers != nil {
			containers, err := p.Containers(ctx, opts.Filters)
			if err != nil {
				return nil, fmt.Errorf("pruning containers: %w", err)
			}
			found = collect(&report.ContainerPruneReports, containers) || found
		}
		if p.Images != nil {
			images, err := p.Images(ctx, core.ImagePruneOptions{All: opts.All, Filters: opts.Filters})
			if err != nil {
				return nil, fmt.Errorf("pruning images: %w", err)
			}
			found = collect(&report.ImagePruneReports, images) || found
		}
		if opts.Volumes && p.Volumes != nil {
			volumes, err := p.Volumes(ctx, opts.Filters)
			if err != nil {
				return nil, fmt.Errorf("pruning volumes: %w", err)
			}
			found = collect(&report.VolumePruneReports, volumes) || found
		}
		if !found {
			break
		}
	}
	if p.Networks != nil {
		networks, err := p.Networks(ctx, opts.Filters)
		if err != nil {
			return nil, fmt.Errorf("pruning networks: %w", err)
		}
		report.NetworkPruneReports = append(report.NetworkPruneReports, networks...)
	}
	return report, nil
}
