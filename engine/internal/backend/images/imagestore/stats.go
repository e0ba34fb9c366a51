package imagestore

import "context"

// Stats counts the images in the store and the bytes their layers and
// metadata take, for the engine's metrics. It reads the store once and reuses
// the listing cache.
func (s *Store) Stats(ctx context.Context) (images int, bytes int64, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	snap, err := s.snapshot()
	if err != nil {
		return 0, 0, err
	}
	seen := map[string]bool{}
	for _, v := range snap.views {
		for _, id := range layerChain(v.img.TopLayer, snap.layerByID) {
			if layer := snap.layerByID[id]; layer != nil && !seen[id] {
				seen[id] = true
				bytes += layer.UncompressedSize
			}
		}
		for _, n := range v.img.BigDataSizes {
			bytes += n
		}
	}
	return len(snap.views), bytes, nil
}
