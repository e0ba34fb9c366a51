package build

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/containers/image/v5/manifest"
	"github.com/containers/storage"
	dockerspec "github.com/moby/docker-image-spec/specs-go/v1"
	"github.com/opencontainers/go-digest"
	specsgo "github.com/opencontainers/image-spec/specs-go"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// cacheMetadataKey names the cache key in the storage metadata of images a
// build commits.
const cacheMetadataKey = "berth.build.cache"

// imageMetadata is what a build records in a storage image's metadata.
type imageMetadata struct {
	CacheKey string `json:"berth.build.cache,omitempty"`
}

// dockerConfig is an image's runtime configuration: OCI's fields plus
// Docker's Healthcheck, OnBuild and Shell.
type dockerConfig = dockerspec.DockerOCIImageConfig

// imageState is the image a stage has built so far.
type imageState struct {
	// id is the committed image ("" before the first commit of a stage
	// that has not been committed, as FROM scratch).
	id string
	// topLayer is the storage layer on which the next step builds.
	topLayer string
	// doc is the image configuration (OCI fields plus Docker's
	// Healthcheck, OnBuild and Shell).
	doc dockerspec.DockerOCIImage
	// cacheKey identifies everything that produced this state.
	cacheKey string
}

// clone returns a deep enough copy of s for a new stage to modify.
func (s *imageState) clone() *imageState {
	out := *s
	raw, _ := json.Marshal(s.doc)
	out.doc = dockerspec.DockerOCIImage{}
	_ = json.Unmarshal(raw, &out.doc)
	return &out
}

// scratchState is the state of FROM scratch.
func scratchState() *imageState {
	st := &imageState{}
	st.doc.Architecture = runtime.GOARCH
	st.doc.OS = runtime.GOOS
	st.doc.RootFS.Type = "layers"
	st.cacheKey = digest.FromString("FROM scratch").Encoded()
	return st
}

// readState reads a stored image's configuration.
func readState(store storage.Store, img *storage.Image) (*imageState, error) {
	key := digest.NewDigestFromEncoded(digest.SHA256, img.ID).String()
	if raw, err := store.ImageBigData(img.ID, storage.ImageDigestBigDataKey); err == nil && len(raw) > 0 {
		if m, err := manifest.FromBlob(raw, manifest.GuessMIMEType(raw)); err == nil && m.ConfigInfo().Digest != "" {
			key = m.ConfigInfo().Digest.String()
		}
	}
	raw, err := store.ImageBigData(img.ID, key)
	if err != nil {
		return nil, fmt.Errorf("reading configuration of image %.12s: %w", img.ID, err)
	}
	st := &imageState{id: img.ID, topLayer: img.TopLayer}
	if err := json.Unmarshal(raw, &st.doc); err != nil {
		return nil, fmt.Errorf("decoding configuration of image %.12s: %w", img.ID, err)
	}
	if st.doc.RootFS.Type == "" {
		st.doc.RootFS.Type = "layers"
	}
	return st, nil
}

// commitSpec says how to store an image.
type commitSpec struct {
	format      string
	annotations map[string]string
	cacheKey    string
}

// commit stores st as an image (reusing an identical one) and returns its ID.
func commit(store storage.Store, st *imageState, spec commitSpec) (string, error) {
	config, err := json.Marshal(st.doc)
	if err != nil {
		return "", err
	}
	configDigest := digest.FromBytes(config)
	layers, err := layerDescriptors(store, st.topLayer, spec.format)
	if err != nil {
		return "", err
	}
	var rawManifest []byte
	if spec.format == "docker" {
		m := manifest.Schema2{
			SchemaVersion:     2,
			MediaType:         manifest.DockerV2Schema2MediaType,
			ConfigDescriptor:  manifest.Schema2Descriptor{MediaType: manifest.DockerV2Schema2ConfigMediaType, Size: int64(len(config)), Digest: configDigest},
			LayersDescriptors: make([]manifest.Schema2Descriptor, 0, len(layers)),
		}
		for _, l := range layers {
			m.LayersDescriptors = append(m.LayersDescriptors, manifest.Schema2Descriptor{MediaType: l.MediaType, Size: l.Size, Digest: l.Digest})
		}
		rawManifest, err = json.Marshal(m)
	} else {
		m := imgspecv1.Manifest{
			Versioned:   specsgo.Versioned{SchemaVersion: 2},
			MediaType:   imgspecv1.MediaTypeImageManifest,
			Config:      imgspecv1.Descriptor{MediaType: imgspecv1.MediaTypeImageConfig, Size: int64(len(config)), Digest: configDigest},
			Layers:      layers,
			Annotations: spec.annotations,
		}
		if m.Layers == nil {
			m.Layers = []imgspecv1.Descriptor{}
		}
		rawManifest, err = json.Marshal(m)
	}
	if err != nil {
		return "", err
	}
	manifestDigest := digest.FromBytes(rawManifest)
	meta, err := json.Marshal(imageMetadata{CacheKey: spec.cacheKey})
	if err != nil {
		return "", err
	}
	id := configDigest.Encoded()
	created := st.doc.Created
	opts := &storage.ImageOptions{
		Digest: manifestDigest,
		BigData: []storage.ImageBigDataOption{
			{Key: configDigest.String(), Data: config, Digest: configDigest},
			{Key: storage.ImageDigestManifestBigDataNamePrefix + "-" + manifestDigest.String(), Data: rawManifest, Digest: manifestDigest},
			{Key: storage.ImageDigestBigDataKey, Data: rawManifest, Digest: manifestDigest},
		},
	}
	if created != nil {
		opts.CreationDate = *created
	}
	_, err = store.CreateImage(id, nil, st.topLayer, string(meta), opts)
	if err != nil && !errors.Is(err, storage.ErrDuplicateID) {
		return "", fmt.Errorf("storing image: %w", err)
	}
	return id, nil
}

// layerDescriptors describes the layer chain ending at top, bottom first,
// as uncompressed blobs.
func layerDescriptors(store storage.Store, top, format string) ([]imgspecv1.Descriptor, error) {
	mediaType := imgspecv1.MediaTypeImageLayer
	if format == "docker" {
		mediaType = manifest.DockerV2SchemaLayerMediaTypeUncompressed
	}
	var out []imgspecv1.Descriptor
	for id := top; id != ""; {
		l, err := store.Layer(id)
		if err != nil {
			return nil, fmt.Errorf("reading layer %.12s: %w", id, err)
		}
		if l.UncompressedDigest == "" {
			return nil, fmt.Errorf("layer %.12s has no known digest", id)
		}
		out = append(out, imgspecv1.Descriptor{MediaType: mediaType, Digest: l.UncompressedDigest, Size: l.UncompressedSize})
		id = l.Parent
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// cacheIndex maps cache keys to the images that carry them.
func cacheIndex(store storage.Store) (map[string]string, error) {
	images, err := store.Images()
	if err != nil {
		return nil, err
	}
	index := map[string]string{}
	for _, img := range images {
		if !strings.Contains(img.Metadata, cacheMetadataKey) {
			continue
		}
		var meta imageMetadata
		if json.Unmarshal([]byte(img.Metadata), &meta) == nil && meta.CacheKey != "" {
			index[meta.CacheKey] = img.ID
		}
	}
	return index, nil
}
