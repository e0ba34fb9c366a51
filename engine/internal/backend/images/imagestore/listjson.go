package imagestore

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/berth-project/berth/engine/internal/core"
)

// encodedLists keeps the unfiltered listings (with and without
// intermediate images) encoded, for as long as the image and container
// stores are unchanged: 100 clients polling images/json (an IDE, a
// dashboard) cost one encoding a change instead of one each, and each
// answer is a single write of bytes already made.
type encodedLists struct {
	mu sync.Mutex
	// byAll is indexed by ImageListOptions.All.
	byAll [2]encodedList
}

type encodedList struct {
	images, containers uint64
	data               []byte
}

// ListJSON is List encoded as JSON (without a trailing newline). The
// unfiltered listings are kept encoded while the stores are unchanged (see
// listCache); the slice may be shared, callers must not modify it.
func (s *Store) ListJSON(ctx context.Context, opts core.ImageListOptions) ([]byte, error) {
	if len(opts.Filters) > 0 || s.lists == nil {
		images, err := s.List(ctx, opts)
		if err != nil {
			return nil, err
		}
		return json.Marshal(images)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, imagesVersion, err := s.lists.images.getVersion(s.snapshot)
	if err != nil {
		return nil, err
	}
	_, containersVersion, err := s.lists.containers.getVersion(s.containerCounts)
	if err != nil {
		return nil, err
	}
	slot := 0
	if opts.All {
		slot = 1
	}
	s.encoded.mu.Lock()
	cached := s.encoded.byAll[slot]
	s.encoded.mu.Unlock()
	if cached.data != nil && cached.images == imagesVersion && cached.containers == containersVersion {
		return cached.data, nil
	}
	// The listing is made from the same cached values (a change since the
	// versions were read makes the next reader encode again).
	snap, err := s.listSnapshot()
	if err != nil {
		return nil, err
	}
	out := make([]core.ImageSummary, 0, len(snap.views))
	for _, v := range snap.views {
		if opts.All || !v.intermediate {
			out = append(out, summaryOf(v, s.cache.repoDigestsOf(v.img)))
		}
	}
	data, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encoding the image list: %w", err)
	}
	s.encoded.mu.Lock()
	s.encoded.byAll[slot] = encodedList{images: imagesVersion, containers: containersVersion, data: data}
	s.encoded.mu.Unlock()
	return data, nil
}
