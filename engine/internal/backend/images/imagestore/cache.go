package imagestore

import (
	"strings"
	"sync"
	"time"

	"github.com/containers/storage"
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
	// arch and os come from the configuration; isList when the image's
	// manifest is a manifest list or an OCI index.
	arch, os string
	isList   bool
	err      error
}

// summaryCache caches summaryEntry by image ID, and the RepoDigests of an
// image by its ID, names and digests (parsing names is the costly part of a
// listing).
type summaryCache struct {
	mu          sync.Mutex
	entries     map[string]*summaryEntry
	repoDigests map[string]digestsEntry
}

// digestsEntry is the RepoDigests computed for one set of names and digests.
type digestsEntry struct {
	key     string
	digests []string
}

func newSummaryCache() *summaryCache {
	return &summaryCache{entries: map[string]*summaryEntry{}, repoDigests: map[string]digestsEntry{}}
}

// repoDigestsOf returns the RepoDigests of img, computing them when its names
// or digests changed. The slice is shared: callers must not modify it.
func (c *summaryCache) repoDigestsOf(img *storage.Image) []string {
	var b strings.Builder
	for _, n := range img.Names {
		b.WriteString(n)
		b.WriteByte(0)
	}
	b.WriteByte('|')
	b.WriteString(img.Digest.String())
	for _, d := range img.Digests {
		b.WriteByte(0)
		b.WriteString(d.String())
	}
	key := b.String()
	c.mu.Lock()
	e, ok := c.repoDigests[img.ID]
	c.mu.Unlock()
	if ok && e.key == key {
		return e.digests
	}
	digests := repoDigests(img)
	c.mu.Lock()
	c.repoDigests[img.ID] = digestsEntry{key: key, digests: digests}
	c.mu.Unlock()
	return digests
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
	for id := range c.repoDigests {
		if !ids[id] {
			delete(c.repoDigests, id)
		}
	}
}

// invalidate drops every entry.
func (c *summaryCache) invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = map[string]*summaryEntry{}
	c.repoDigests = map[string]digestsEntry{}
}
