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
			size, err = TreeSize(filepath.Join(s.store.GraphRoot(), "overlay", c.LayerID, "diff"), NotDir)
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

// TreeSize is the apparent size of the entries under dir for which counts
// is true (0 when dir is gone; an entry removed meanwhile counts as empty).
// A writable layer counts all but its directories (NotDir); system df counts
// a volume's regular files (RegularFile).
func TreeSize(dir string, counts func(fs.DirEntry) bool) (int64, error) {
	var size int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !counts(d) {
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

// NotDir counts every entry but directories.
func NotDir(d fs.DirEntry) bool { return !d.IsDir() }

// RegularFile counts regular files only.
func RegularFile(d fs.DirEntry) bool { return d.Type().IsRegular() }
