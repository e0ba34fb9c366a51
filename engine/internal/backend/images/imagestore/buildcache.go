package imagestore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/berth-project/berth/engine/internal/core"
)

// BuildCacheMetadataKey names, in a storage image's metadata, the cache key a
// build recorded on the image it committed for a step. An untagged image
// carrying it is an entry of the build cache.
const BuildCacheMetadataKey = "berth.build.cache"

// PruneBuildCache removes build cache images: the untagged images builds
// committed for their steps that no container (a RUN step's included) uses
// and that were created before until (zero: any time). Without all only
// dangling ones go, over and over as Prune does, since removing one can leave
// its parent dangling; with all, those that images are built on go too (only
// the record: the layers stay with the images above). It returns the removed
// images' IDs and the bytes of the layers that went with them.
func (s *Store) PruneBuildCache(ctx context.Context, all bool, until time.Time) (ids []string, freed uint64, err error) {
	defer s.cache.invalidate()
	s.settleRemovals()
	before, err := s.layerSizes()
	if err != nil {
		return nil, 0, err
	}
	ids = []string{}
	defer func() {
		after, lerr := s.layerSizes()
		if lerr != nil {
			return
		}
		for id, size := range before {
			if _, ok := after[id]; !ok {
				freed += size
			}
		}
	}()
	removed := map[string]bool{}
	for {
		if err := ctx.Err(); err != nil {
			return ids, 0, err
		}
		candidates, err := s.buildCacheCandidates(all, until, removed)
		if err != nil || len(candidates) == 0 {
			return ids, 0, err
		}
		for _, id := range candidates {
			report := core.ImageRemoveReport{}
			err := s.removeOne(ctx, id, core.ImageRemoveOptions{NoPrune: true}, &report, true)
			removed[id] = true
			switch {
			case errors.Is(err, core.ErrNoSuchImage), errors.Is(err, core.ErrImageInUse):
				// Gone already, or a container took it since the snapshot:
				// not unused any more.
				continue
			case err != nil:
				return ids, 0, err
			}
			ids = append(ids, id)
		}
	}
}

// layerSizes maps the store's layers to their uncompressed sizes.
func (s *Store) layerSizes() (map[string]uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	layers, err := s.store.Layers()
	if err != nil {
		return nil, fmt.Errorf("listing layers: %w", err)
	}
	out := make(map[string]uint64, len(layers))
	for _, l := range layers {
		out[l.ID] = uint64(max(l.UncompressedSize, 0))
	}
	return out, nil
}

// buildCacheCandidates lists the build cache images PruneBuildCache may
// remove now.
func (s *Store) buildCacheCandidates(all bool, until time.Time, skip map[string]bool) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	snap, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, v := range snap.views {
		img := v.img
		if skip[img.ID] || len(img.Names) > 0 || img.ReadOnly || v.containers > 0 ||
			!strings.Contains(img.Metadata, BuildCacheMetadataKey) {
			continue
		}
		if !all && v.children > 0 {
			continue
		}
		if !until.IsZero() && !img.Created.Before(until) {
			continue
		}
		out = append(out, img.ID)
	}
	return out, nil
}
