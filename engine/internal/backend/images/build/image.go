package build

import (
	"encoding/json"
	"strings"

	"github.com/containers/storage"
	"github.com/opencontainers/go-digest"

	"github.com/berth-project/berth/engine/internal/backend/images/imagestore"
)

// imageMetadata is what a build records in a storage image's metadata; its
// key is imagestore.BuildCacheMetadataKey (TestImageMetadataKey).
type imageMetadata struct {
	CacheKey string `json:"berth.build.cache,omitempty"`
}

// imageState is the image a stage has built so far.
type imageState struct {
	// id is the last committed image ("" before anything was committed on
	// FROM scratch).
	id string
	// topLayer is the storage layer on which the next step builds.
	topLayer string
	// config is the runtime configuration as the instructions so far made
	// it; it also keeps what the OCI format cannot store (HEALTHCHECK,
	// ONBUILD, SHELL) for the rest of the build.
	config imagestore.RuntimeConfig
	// cacheKey identifies everything that produced this state.
	cacheKey string
}

// clone returns a copy of s whose configuration can be changed alone.
func (s *imageState) clone() *imageState {
	out := *s
	raw, _ := json.Marshal(s.config)
	out.config = imagestore.RuntimeConfig{}
	_ = json.Unmarshal(raw, &out.config)
	return &out
}

// scratchState is the state of FROM scratch.
func scratchState() *imageState {
	return &imageState{cacheKey: digest.FromString("FROM scratch").Encoded()}
}

// cacheIndex maps cache keys to the images that carry them.
func cacheIndex(store storage.Store) (map[string]string, error) {
	images, err := store.Images()
	if err != nil {
		return nil, err
	}
	index := map[string]string{}
	for _, img := range images {
		if !strings.Contains(img.Metadata, imagestore.BuildCacheMetadataKey) {
			continue
		}
		var meta imageMetadata
		if json.Unmarshal([]byte(img.Metadata), &meta) == nil && meta.CacheKey != "" {
			index[meta.CacheKey] = img.ID
		}
	}
	return index, nil
}
