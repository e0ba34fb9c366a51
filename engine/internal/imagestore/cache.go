package imagestore

import (
	"sync"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// summaryEntry holds what a listing needs from an image's configuration and
// layers. An image's configuration and layers never change for a given ID and
// top layer, so entries stay valid until the image goes away.
type summaryEntry struct {
	topLayer string
	labels   map[string]string
	created  time.Time
	size     int64
	bigData  int64
	// diffIDs and history decide parent and child images, as Podman does.
	diffIDs []string
	history []ocispec.History
	err     error
}

// summaryCache caches summaryEntry by image ID.
type summaryCache struct {
	mu      sync.Mutex
	entries map[string]*summaryEntry
}

func newSummaryCache() *summaryCache {
	return &summaryCache{entries: map[string]*summaryEntry{}}
}

// get returns the entry for id if it was computed for topLayer.
func (c *summaryCache) get(id, topLayer string, bigData int64) *summaryEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[id]
	if e == nil || e.topLayer != topLayer || e.bigData != bigData {
		return nil
	}
	return e
}

func (c *summaryCache) put(id string, e *summaryEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries[id] = e
}

// retain drops the entries of images that no longer exist.
func (c *summaryCache) retain(ids map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.entries {
		if !ids[id] {
			delete(c.entries, id)
		}
	}
}

// invalidate drops every entry.
func (c *summaryCache) invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = map[string]*summaryEntry{}
}
