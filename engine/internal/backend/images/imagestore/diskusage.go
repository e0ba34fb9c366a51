package imagestore

import (
	"context"

	"github.com/containers/image/v5/docker/reference"

	"github.com/berth-project/berth/engine/internal/core"
)

// DiskUsage implements core.Images from one read of the store: a layer used
// by more than one image counts as shared by each of them, any other layer
// (and the image's own metadata) as unique to its image. One entry per
// repository tag, as Podman reports them; an untagged image is <none>:<none>.
func (s *Store) DiskUsage(ctx context.Context) (*core.ImagesDiskUsage, error) {
	// The listing's snapshot, kept while the stores are unchanged (see
	// listCache): a df no longer re-reads every image, layer and container
	// record of the store.
	s.mu.RLock()
	snap, err := s.listSnapshot()
	s.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	chains := make([][]string, len(snap.views))
	users := map[string]int{}
	for i, v := range snap.views {
		chains[i] = layerChain(v.img.TopLayer, snap.layerByID)
		for _, id := range chains[i] {
			users[id]++
		}
	}
	report := &core.ImagesDiskUsage{Images: make([]*core.ImageDiskUsage, 0, len(snap.views))}
	for id := range users {
		report.TotalSize += layerSize(snap, id)
	}
	for i, v := range snap.views {
		base := core.ImageDiskUsage{ImageID: v.img.ID, Created: v.entry.created, Containers: v.containers}
		for _, id := range chains[i] {
			if users[id] > 1 {
				base.SharedSize += layerSize(snap, id)
			} else {
				base.UniqueSize += layerSize(snap, id)
			}
		}
		base.UniqueSize += v.entry.bigData
		base.Size = base.SharedSize + base.UniqueSize
		report.TotalSize += v.entry.bigData
		if len(v.img.Names) == 0 {
			entry := base
			entry.Repository, entry.Tag = "<none>", "<none>"
			report.Images = append(report.Images, &entry)
			continue
		}
		for _, name := range v.img.Names {
			entry := base
			entry.Repository, entry.Tag = repositoryAndTag(name)
			report.Images = append(report.Images, &entry)
		}
	}
	return report, nil
}

// layerSize is a layer's uncompressed size (0 when unknown).
func layerSize(snap *snapshot, id string) int64 {
	if layer := snap.layerByID[id]; layer != nil && layer.UncompressedSize > 0 {
		return layer.UncompressedSize
	}
	return 0
}

// repositoryAndTag splits a stored name; a digest-only name has tag <none>.
func repositoryAndTag(name string) (string, string) {
	named, err := reference.ParseNormalizedNamed(name)
	if err != nil {
		return name, "<none>"
	}
	if tagged, ok := named.(reference.NamedTagged); ok {
		return named.Name(), tagged.Tag()
	}
	return named.Name(), "<none>"
}
