package imagestore

import (
	"fmt"
	"path/filepath"
	"sync"

	"github.com/containers/storage/pkg/lockfile"
)

// changeCache keeps a value computed from one of containers/storage's
// stores for as long as that store's own change record says nothing
// changed: containers/storage stamps a "last write" token into a store's
// lock file on every change, by this engine or any other writer. A reader
// compares the token instead of re-reading the store.
type changeCache[T any] struct {
	lock *lockfile.LockFile

	mu      sync.Mutex
	value   T
	written *lockfile.LastWrite
	// version counts the values computed, so that what is derived from a
	// value (an encoded listing) can tell whether it is still current.
	version uint64
}

// newChangeCache watches the store whose lock file is at path.
func newChangeCache[T any](path string) (*changeCache[T], error) {
	lf, err := lockfile.GetLockFile(path)
	if err != nil {
		return nil, err
	}
	return &changeCache[T]{lock: lf}, nil
}

// get returns the cached value when the store has not changed since it was
// computed, or computes a new one with read. The token is taken before the
// store is read, so a change racing with the read makes the next reader read
// again rather than keep a stale value. Readers that find a change read
// side by side; none waits for another.
func (c *changeCache[T]) get(read func() (T, error)) (T, error) {
	value, _, err := c.getVersion(read)
	return value, err
}

// getVersion is get with the version of the value returned: the same
// version is the same value.
func (c *changeCache[T]) getVersion(read func() (T, error)) (T, uint64, error) {
	c.mu.Lock()
	value, written, version := c.value, c.written, c.version
	c.mu.Unlock()
	var zero T
	c.lock.RLock()
	var now lockfile.LastWrite
	var err error
	changed := true
	if written == nil {
		now, err = c.lock.GetLastWrite()
	} else {
		now, changed, err = c.lock.ModifiedSince(*written)
	}
	c.lock.Unlock()
	if err != nil {
		return zero, 0, fmt.Errorf("reading the store's change record: %w", err)
	}
	if !changed {
		return value, version, nil
	}
	fresh, err := read()
	if err != nil {
		return zero, 0, err
	}
	c.mu.Lock()
	c.version++
	c.value, c.written, version = fresh, &now, c.version
	c.mu.Unlock()
	return fresh, version, nil
}

// drop forgets the value.
func (c *changeCache[T]) drop() {
	c.mu.Lock()
	var zero T
	c.value, c.written = zero, nil
	c.version++
	c.mu.Unlock()
}

// listCache serves image listings: the images with their layers, parents
// and sizes, kept while the image store is unchanged, and the number of
// containers of each image, kept while the container store is unchanged.
// Creating and removing containers (which also writes layers) thus never
// makes a listing re-read the images and every layer, and 100 readers beside
// 20 clients creating containers no longer queue behind the layer store.
type listCache struct {
	images     *changeCache[*snapshot]
	containers *changeCache[map[string]int]
}

// newListCache finds the lock files of store's image and container stores
// (their paths are containers/storage's layout for a store that is not
// transient). Without them it returns nil, and listings read the store
// every time.
func (s *Store) newListCache() *listCache {
	root := s.store.GraphRoot()
	prefix := s.store.GraphDriverName() + "-"
	images, err := newChangeCache[*snapshot](filepath.Join(root, prefix+"images", "images.lock"))
	if err == nil {
		var containers *changeCache[map[string]int]
		if containers, err = newChangeCache[map[string]int](filepath.Join(root, prefix+"containers", "containers.lock")); err == nil {
			return &listCache{images: images, containers: containers}
		}
	}
	s.logger.Warn("image listings are not cached", "error", err)
	return nil
}

// drop forgets everything (see Store.Changed).
func (c *listCache) drop() {
	c.images.drop()
	c.containers.drop()
}

// containerCounts counts the containers of each image.
func (s *Store) containerCounts() (map[string]int, error) {
	containers, err := s.store.Containers()
	if err != nil {
		return nil, fmt.Errorf("listing containers: %w", err)
	}
	counts := make(map[string]int, len(containers))
	for _, c := range containers {
		counts[c.ImageID]++
	}
	return counts, nil
}
