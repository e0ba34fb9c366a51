package imagestore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/berth-project/berth/engine/internal/core"
)

// Prune implements core.Images: it removes dangling images (with All, every
// image no container uses), over and over until no more qualify, since
// removing an image can leave its parent dangling. Filters (label, label!,
// until) narrow the selection. Each removed image is reported with its size.
func (s *Store) Prune(ctx context.Context, opts core.ImagePruneOptions) ([]core.PruneReport, error) {
	filters := map[string][]string{}
	for name, values := range opts.Filters {
		switch name {
		case "label", "label!", "until":
			filters[name] = values
		case "dangling":
			for _, v := range values {
				dangling, err := strconv.ParseBool(v)
				if err != nil {
					return nil, core.InvalidArgument("filters", fmt.Errorf("dangling filter: %q is not true or false", v))
				}
				if !dangling {
					opts.All = true
				}
			}
		case "all":
			for _, v := range values {
				all, err := strconv.ParseBool(v)
				if err != nil {
					return nil, core.InvalidArgument("filters", fmt.Errorf("all filter: %q is not true or false", v))
				}
				opts.All = opts.All || all
			}
		default:
			return nil, core.InvalidArgument("filters", fmt.Errorf("unsupported image prune filter %q", name))
		}
	}
	defer s.cache.invalidate()
	// A container removed just before (rm -f, then prune) still holds its
	// image in storage until its layer's background deletion ends.
	s.settleRemovals()

	reports := []core.PruneReport{}
	removed := map[string]bool{}
	for {
		if err := ctx.Err(); err != nil {
			return reports, err
		}
		candidates, err := s.pruneCandidates(filters, opts.All, removed)
		if err != nil {
			return reports, err
		}
		if len(candidates) == 0 {
			return reports, nil
		}
		progress := false
		for _, c := range candidates {
			report := core.ImageRemoveReport{}
			err := s.removeOne(ctx, c.id, core.ImageRemoveOptions{NoPrune: true}, &report, true)
			removed[c.id] = true
			if err != nil {
				if errors.Is(err, core.ErrNoSuchImage) {
					continue
				}
				reports = append(reports, core.PruneReport{ID: c.id, Err: err.Error()})
				continue
			}
			progress = true
			reports = append(reports, core.PruneReport{ID: c.id, Size: uint64(c.size)})
		}
		if !progress {
			return reports, nil
		}
	}
}

// pruneCandidate is an image selected for pruning.
type pruneCandidate struct {
	id   string
	size int64
}

// pruneCandidates selects unused images: dangling ones, or with all every
// image without containers and without child images.
func (s *Store) pruneCandidates(filters map[string][]string, all bool, skip map[string]bool) ([]pruneCandidate, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	snap, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	match, err := s.compileFilters(filters, snap)
	if err != nil {
		return nil, err
	}
	var out []pruneCandidate
	for _, v := range snap.views {
		if skip[v.img.ID] || v.containers > 0 || v.img.ReadOnly || v.children > 0 {
			continue
		}
		if !all && !v.dangling {
			continue
		}
		if !match(v) {
			continue
		}
		out = append(out, pruneCandidate{id: v.img.ID, size: v.entry.size})
	}
	return out, nil
}
