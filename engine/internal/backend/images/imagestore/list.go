package imagestore

import (
	"context"
	"fmt"
	"sort"

	"github.com/containers/image/v5/manifest"
	"github.com/containers/storage"

	"github.com/berth-project/berth/engine/internal/core"
)

// imageView is one image with what listings and filters look at, computed
// from a single snapshot of the store.
type imageView struct {
	img          *storage.Image
	entry        *summaryEntry
	parentID     string
	children     int
	containers   int
	dangling     bool
	intermediate bool
}

// snapshot is the store read once: images, layers and containers.
type snapshot struct {
	views     []*imageView
	byID      map[string]*imageView
	layerByID map[string]*storage.Layer
	// layers are in the store's order (creation order).
	layers []storage.Layer
}

// List implements core.Images. The store is read once per change (images,
// layers and containers together); per-image configuration and sizes come
// from a cache keyed by image ID, so a listing costs no file reads for images
// seen before.
func (s *Store) List(ctx context.Context, opts core.ImageListOptions) ([]core.ImageSummary, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	snap, err := s.listSnapshot()
	if err != nil {
		return nil, err
	}
	match, err := s.compileFilters(opts.Filters, snap)
	if err != nil {
		return nil, err
	}
	out := make([]core.ImageSummary, 0, len(snap.views))
	for _, v := range snap.views {
		if !opts.All && v.intermediate {
			continue
		}
		if !match(v) {
			continue
		}
		out = append(out, summaryOf(v, s.cache.repoDigestsOf(v.img)))
	}
	return out, nil
}

// listSnapshot is the snapshot a listing reads: the cached images (see
// listCache) with the current container counts, in views of its own.
func (s *Store) listSnapshot() (*snapshot, error) {
	if s.lists == nil {
		return s.snapshot()
	}
	cached, err := s.lists.images.get(s.snapshot)
	if err != nil {
		return nil, err
	}
	counts, err := s.lists.containers.get(s.containerCounts)
	if err != nil {
		return nil, err
	}
	snap := *cached
	snap.views = make([]*imageView, len(cached.views))
	for i, v := range cached.views {
		view := *v
		view.containers = counts[v.img.ID]
		snap.views[i] = &view
	}
	return &snap, nil
}

// snapshot reads the store and computes parents, children and container use.
func (s *Store) snapshot() (*snapshot, error) {
	res, err := s.store.MultiList(storage.MultiListOptions{Images: true, Layers: true, Containers: true})
	if err != nil {
		return nil, fmt.Errorf("listing images: %w", err)
	}
	snap := &snapshot{
		views:     make([]*imageView, 0, len(res.Images)),
		byID:      make(map[string]*imageView, len(res.Images)),
		layerByID: make(map[string]*storage.Layer, len(res.Layers)),
		layers:    res.Layers,
	}
	for i := range res.Layers {
		snap.layerByID[res.Layers[i].ID] = &res.Layers[i]
	}
	byTopLayer := make(map[string][]*imageView, len(res.Images))
	present := make(map[string]bool, len(res.Images))
	for i := range res.Images {
		img := &res.Images[i]
		v := &imageView{img: img}
		v.entry = s.entryFor(img, snap.layerByID)
		snap.views = append(snap.views, v)
		snap.byID[img.ID] = v
		present[img.ID] = true
		if img.TopLayer != "" {
			byTopLayer[img.TopLayer] = append(byTopLayer[img.TopLayer], v)
		}
	}
	s.cache.retain(present)
	for _, v := range snap.views {
		top := snap.layerByID[v.img.TopLayer]
		if top == nil {
			continue
		}
		candidates := append([]*imageView{}, byTopLayer[top.ID]...)
		if top.Parent != "" {
			candidates = append(candidates, byTopLayer[top.Parent]...)
		}
		for _, p := range candidates {
			if p != v && isParentOf(p.entry, v.entry) {
				v.parentID = p.img.ID
				p.children++
				break
			}
		}
	}
	for i := range res.Containers {
		if v := snap.byID[res.Containers[i].ImageID]; v != nil {
			v.containers++
		}
	}
	for _, v := range snap.views {
		untagged := len(v.img.Names) == 0
		v.dangling = untagged && v.children == 0
		v.intermediate = untagged && v.children > 0
	}
	sort.SliceStable(snap.views, func(i, j int) bool {
		return snap.views[i].entry.created.After(snap.views[j].entry.created)
	})
	return snap, nil
}

// entryFor returns the cached listing data of img, computing it on first use.
func (s *Store) entryFor(img *storage.Image, layerByID map[string]*storage.Layer) *summaryEntry {
	var bigData int64
	for _, n := range img.BigDataSizes {
		bigData += n
	}
	if e := s.cache.get(img.ID, img.TopLayer, bigData); e != nil {
		return e
	}
	e := &summaryEntry{topLayer: img.TopLayer, bigData: bigData}
	rawManifest, mimeType := s.readManifest(img)
	e.isList = mimeType != "" && manifest.MIMETypeIsMultiImage(mimeType)
	cfg, err := s.readConfig(img, rawManifest, mimeType)
	if err != nil {
		e.err = err
		e.created = img.Created.UTC()
	} else {
		e.created = createdOf(img, cfg)
		if cfg.Config.Labels != nil {
			e.labels = cfg.Config.Labels
		}
		for _, d := range cfg.RootFS.DiffIDs {
			e.diffIDs = append(e.diffIDs, d.String())
		}
		e.history = cfg.History
		e.arch, e.os = cfg.Architecture, cfg.OS
	}
	e.size = imageSize(img, layerChain(img.TopLayer, layerByID), layerByID)
	s.cache.put(img.ID, e)
	return e
}

// summaryOf renders a view as a listing row, Podman's way: RepoTags carries
// every name of the image.
func summaryOf(v *imageView, digests []string) core.ImageSummary {
	// RepoTags carries every name, null when there is none (as Podman lists it).
	var names []string
	if len(v.img.Names) > 0 {
		names = append(names, v.img.Names...)
	}
	// Like Podman, an image without labels lists "Labels": null.
	labels := v.entry.labels
	isList := v.entry.isList
	return core.ImageSummary{
		ID:             v.img.ID,
		ParentID:       v.parentID,
		RepoTags:       names,
		RepoDigests:    digests,
		Created:        v.entry.created.Unix(),
		Size:           v.entry.size,
		SharedSize:     0,
		VirtualSize:    v.entry.size,
		Labels:         labels,
		Containers:     v.containers,
		ReadOnly:       v.img.ReadOnly,
		Dangling:       v.dangling,
		Names:          names,
		Digest:         v.img.Digest.String(),
		Arch:           v.entry.arch,
		Os:             v.entry.os,
		IsManifestList: &isList,
		History:        append([]string{}, v.img.NamesHistory...),
	}
}

// isParentOf reports whether child was built on parent: it uses all of the
// parent's layers and has the parent's history plus one step.
func isParentOf(parent, child *summaryEntry) bool {
	if parent.err != nil || child.err != nil {
		return false
	}
	if len(parent.diffIDs) > len(child.diffIDs) || len(parent.history)+1 != len(child.history) {
		return false
	}
	for i := range parent.diffIDs {
		if parent.diffIDs[i] != child.diffIDs[i] {
			return false
		}
	}
	for i := range parent.history {
		a, b := parent.history[i], child.history[i]
		if a.CreatedBy != b.CreatedBy || a.Author != b.Author || a.Comment != b.Comment || a.EmptyLayer != b.EmptyLayer {
			return false
		}
		if (a.Created == nil) != (b.Created == nil) || (a.Created != nil && !a.Created.Equal(*b.Created)) {
			return false
		}
	}
	return true
}
