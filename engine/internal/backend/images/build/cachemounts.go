package build

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/images/imagestore"
	"github.com/berth-project/berth/engine/internal/core"
)

// pruneCacheDirs removes the RUN --mount=type=cache directories under root
// last changed before until (zero: any time), returning their names and the
// bytes they held. They are moved into one directory in trash (a build
// temporary directory, which a restarted engine removes) and deleted there: a
// kill -9 never leaves a half-emptied cache directory for a build to use.
func pruneCacheDirs(root, trash string, until time.Time) ([]string, uint64, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, 0, fmt.Errorf("reading the build cache directories: %w", err)
	}
	gone, err := os.MkdirTemp(trash, tmpPrefix+"cache-")
	if err != nil {
		return nil, 0, fmt.Errorf("pruning the build cache: %w", err)
	}
	names, err := moveCacheDirs(root, gone, entries, until)
	var freed uint64
	for _, name := range names {
		freed += treeSize(filepath.Join(gone, name))
	}
	if rmErr := os.RemoveAll(gone); rmErr != nil && err == nil {
		err = fmt.Errorf("pruning the build cache: %w", rmErr)
	}
	return names, freed, err
}

// moveCacheDirs renames into gone the entries of root that are directories
// last changed before until, and returns their names.
func moveCacheDirs(root, gone string, entries []fs.DirEntry, until time.Time) ([]string, error) {
	var names []string
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		if !e.IsDir() {
			continue
		}
		if info, err := e.Info(); err != nil || (!until.IsZero() && !info.ModTime().Before(until)) {
			continue
		}
		if err := os.Rename(dir, filepath.Join(gone, e.Name())); err != nil {
			return names, fmt.Errorf("pruning the build cache: %w", err)
		}
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names, nil
}

// treeSize is the bytes the regular files under dir hold.
func treeSize(dir string) uint64 {
	var n uint64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += uint64(info.Size())
			}
		}
		return nil
	})
	return n
}

// PruneCache implements core.Builder: the dangling step images (with All,
// every unused one, and the cache mount directories), those created before
// the until filter where one is given. It waits for the builds running to
// end, and builds asked for meanwhile wait for it: a build never finds the
// step image or cache directory it looked up gone.
func (b *Builder) PruneCache(ctx context.Context, opts core.BuildCachePruneOptions) (core.BuildCachePruneReport, error) {
	report := core.BuildCachePruneReport{CachesDeleted: []string{}}
	until, err := buildCacheUntil(opts.Filters)
	if err != nil {
		return report, err
	}
	b.cacheLock.Lock()
	defer b.cacheLock.Unlock()
	ids, freed, err := b.o.Store.PruneBuildCache(ctx, opts.All, until)
	report.CachesDeleted = append(report.CachesDeleted, ids...)
	report.SpaceReclaimed = freed
	if err != nil || !opts.All {
		return report, err
	}
	dirs, freed, err := pruneCacheDirs(b.cacheDir(), b.tmpDir(), until)
	report.CachesDeleted = append(report.CachesDeleted, dirs...)
	report.SpaceReclaimed += freed
	return report, err
}

// buildCacheUntil reads a build cache prune's filters: until, at most once,
// is the only one.
func buildCacheUntil(filters map[string][]string) (time.Time, error) {
	var until time.Time
	for name, values := range filters {
		if name != "until" {
			return until, core.InvalidArgument("filters", fmt.Errorf("unsupported build cache filter %q: the engine filters its build cache by until only", name))
		}
		if len(values) > 1 {
			return until, core.InvalidArgument("filters", errors.New("the until filter takes one value"))
		}
		for _, v := range values {
			t, err := imagestore.ParseTimestamp(v, time.Now())
			if err != nil {
				return until, core.InvalidArgument("filters", fmt.Errorf("until filter: %w", err))
			}
			until = t
		}
	}
	return until, nil
}
