package imagestore

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
)

// WritableLayerSizes returns the size of every storage container's
// writable layer, by container ID. With overlay it walks each layer's diff
// directory (what the driver's diff size measures, without its graph lock
// and parent checks per layer); other drivers go through their DiffSize.
func (s *Store) WritableLayerSizes() (map[string]int64, error) {
	containers, err := s.store.Containers()
	if err != nil {
		return nil, fmt.Errorf("listing storage containers: %w", err)
	}
	sizes := make(map[string]int64, len(containers))
	overlay := s.store.GraphDriverName() == "overlay"
	for _, c := range containers {
		var size int64
		if overlay {
			size, err = diffDirSize(filepath.Join(s.store.GraphRoot(), "overlay", c.LayerID, "diff"))
		} else {
			size, err = s.store.DiffSize("", c.LayerID)
		}
		if err != nil {
			continue
		}
		sizes[c.ID] = size
	}
	return sizes, nil
}

// diffDirSize is the apparent size of what lies under dir, directories
// excluded (a layer removed meanwhile counts as empty).
func diffDirSize(dir string) (int64, error) {
	var size int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		size += info.Size()
		return nil
	})
	return size, err
}
