package imagestore

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/containers/image/v5/docker/reference"
	"github.com/containers/image/v5/manifest"
	"github.com/containers/storage"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-project/berth/engine/internal/core"
)

// imageConfig is an image configuration in either OCI or Docker form: the OCI
// fields plus the Docker-only ones clients show (comment, health check).
type imageConfig struct {
	ocispec.Image
	healthCheck *core.HealthConfig
}

// dockerConfigExtras are the Docker-format configuration fields OCI lacks.
type dockerConfigExtras struct {
	Config *struct {
		Healthcheck *core.HealthConfig `json:"Healthcheck,omitempty"`
	} `json:"config,omitempty"`
}

// readManifest returns img's manifest and its MIME type ("" without a manifest,
// as for images committed without one).
func (s *Store) readManifest(img *storage.Image) ([]byte, string) {
	raw, err := s.store.ImageBigData(img.ID, storage.ImageDigestBigDataKey)
	if err != nil || len(raw) == 0 {
		return nil, ""
	}
	return raw, manifest.GuessMIMEType(raw)
}

// readConfig returns img's decoded configuration. The config blob is stored
// under its digest; the manifest names it. A manifest list has none: its
// configuration is empty.
func (s *Store) readConfig(img *storage.Image, rawManifest []byte, mimeType string) (imageConfig, error) {
	var cfg imageConfig
	if manifest.MIMETypeIsMultiImage(mimeType) {
		// A manifest list has no configuration of its own.
		return cfg, nil
	}
	raw, err := s.configBlob(img, rawManifest, mimeType)
	if err != nil {
		return cfg, err
	}
	if err := json.Unmarshal(raw, &cfg.Image); err != nil {
		return cfg, fmt.Errorf("decoding configuration of image %s: %w", shortID(img.ID), err)
	}
	var extras dockerConfigExtras
	if json.Unmarshal(raw, &extras) == nil && extras.Config != nil {
		cfg.healthCheck = extras.Config.Healthcheck
	}
	return cfg, nil
}

// configBlob returns img's configuration as stored: under the digest its
// manifest names, else under the image ID's digest.
func (s *Store) configBlob(img *storage.Image, rawManifest []byte, mimeType string) ([]byte, error) {
	key := digest.NewDigestFromEncoded(digest.SHA256, img.ID).String()
	if rawManifest != nil {
		if m, err := manifest.FromBlob(rawManifest, mimeType); err == nil && m.ConfigInfo().Digest != "" {
			key = m.ConfigInfo().Digest.String()
		}
	}
	raw, err := s.store.ImageBigData(img.ID, key)
	if err != nil {
		return nil, fmt.Errorf("reading configuration of image %s: %w", shortID(img.ID), err)
	}
	return raw, nil
}

// describe builds the domain view of a storage image.
func (s *Store) describe(img *storage.Image) (*core.Image, error) {
	rawManifest, mimeType := s.readManifest(img)
	cfg, err := s.readConfig(img, rawManifest, mimeType)
	if err != nil {
		return nil, err
	}
	layers, err := s.store.Layers()
	if err != nil {
		return nil, fmt.Errorf("listing layers: %w", err)
	}
	layerByID := make(map[string]*storage.Layer, len(layers))
	for i := range layers {
		layerByID[layers[i].ID] = &layers[i]
	}
	chain := layerChain(img.TopLayer, layerByID)
	out := &core.Image{
		ID:           img.ID,
		Digest:       img.Digest.String(),
		Names:        append([]string(nil), img.Names...),
		RepoTags:     repoTags(img.Names),
		RepoDigests:  repoDigests(img),
		NamesHistory: append([]string(nil), img.NamesHistory...),
		TopLayer:     img.TopLayer,
		Layers:       chain,
		Created:      createdOf(img, cfg),
		Size:         imageSize(img, chain, layerByID),
		ManifestType: mimeType,
		Config:       cfg.Image,
		Annotations:  manifestAnnotations(rawManifest, mimeType),
		ReadOnly:     img.ReadOnly,
		HealthCheck:  cfg.healthCheck,
		Dangling:     len(img.Names) == 0,
		GraphDriver:  core.GraphDriver{Name: s.store.GraphDriverName(), Data: map[string]string{}},
	}
	if img.TopLayer != "" {
		if driver, err := s.store.GraphDriver(); err == nil {
			if data, err := driver.Metadata(img.TopLayer); err == nil {
				out.GraphDriver.Data = data
			}
		}
	}
	if _, parent, err := s.family(img.ID); err == nil && parent != nil {
		out.Parent = parent.ID
	}
	return out, nil
}

// layerChain lists the layer IDs from top down to the base layer.
func layerChain(top string, layerByID map[string]*storage.Layer) []string {
	var chain []string
	seen := map[string]bool{}
	for id := top; id != "" && !seen[id]; {
		seen[id] = true
		chain = append(chain, id)
		layer := layerByID[id]
		if layer == nil {
			break
		}
		id = layer.Parent
	}
	return chain
}

// imageSize is the uncompressed size of an image's layers plus its stored
// metadata, as containers/storage's ImageSize counts it.
func imageSize(img *storage.Image, chain []string, layerByID map[string]*storage.Layer) int64 {
	var size int64
	for _, id := range chain {
		if layer := layerByID[id]; layer != nil && layer.UncompressedSize > 0 {
			size += layer.UncompressedSize
		}
	}
	for _, n := range img.BigDataSizes {
		size += n
	}
	return size
}

// createdOf is the build time from the configuration, else the storage time.
func createdOf(img *storage.Image, cfg imageConfig) time.Time {
	if cfg.Created != nil && !cfg.Created.IsZero() {
		return cfg.Created.UTC()
	}
	return img.Created.UTC()
}

// manifestAnnotations returns an OCI manifest's annotations (Docker manifests have none).
func manifestAnnotations(raw []byte, mimeType string) map[string]string {
	if mimeType != ocispec.MediaTypeImageManifest {
		return map[string]string{}
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(raw, &m); err != nil || m.Annotations == nil {
		return map[string]string{}
	}
	return m.Annotations
}

// repoTags are the names of an image that are tags (not digested references).
func repoTags(names []string) []string {
	tags := []string{}
	for _, name := range names {
		named, err := reference.ParseNormalizedNamed(name)
		if err != nil {
			continue
		}
		if _, isDigested := named.(reference.Digested); isDigested {
			continue
		}
		tags = append(tags, name)
	}
	return tags
}

// repoDigests lists repo@digest for every repository the image is named in and
// every manifest digest it has, as Podman reports them.
func repoDigests(img *storage.Image) []string {
	digests := img.Digests
	if len(digests) == 0 && img.Digest != "" {
		digests = []digest.Digest{img.Digest}
	}
	seen := map[string]bool{}
	out := []string{}
	for _, name := range img.Names {
		named, err := reference.ParseNormalizedNamed(name)
		if err != nil {
			continue
		}
		for _, d := range digests {
			withDigest, err := reference.WithDigest(reference.TrimNamed(named), d)
			if err != nil {
				continue
			}
			if s := withDigest.String(); !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	sort.Strings(out)
	return out
}
