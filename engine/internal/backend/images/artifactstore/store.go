// Package artifactstore keeps OCI artifacts in an OCI image layout under the
// engine's root (ROOT/artifacts): blobs under blobs/sha256, one manifest per
// artifact, and index.json naming each manifest with the
// org.opencontainers.image.ref.name annotation. containers/image's oci
// layout transport reads the layout for pushes; pulls land in a staging
// layout first. Every change becomes visible by one atomic rename of
// index.json, so an interrupted add or pull leaves nothing half-visible, and
// the blobs it left behind are swept at the next start.
package artifactstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/containers/image/v5/docker/reference"
	"github.com/opencontainers/go-digest"
	imgspec "github.com/opencontainers/image-spec/specs-go"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-project/berth/engine/internal/backend/platform/durable"
	"github.com/berth-project/berth/engine/internal/core"
)

// Options configure Open.
type Options struct {
	// Dir is the layout directory (ROOT/artifacts); its staging directory
	// sits beside it (ROOT/artifacts-staging).
	Dir string
	// MaxFileSize bounds the bytes one add accepts (0: sizelimit.DefaultMax,
	// the engine's --max-expanded-size).
	MaxFileSize int64
	// Registry moves artifacts to and from registries.
	Registry Registry
	// Logger receives sweep events; nil discards them.
	Logger *slog.Logger
}

// Store implements core.Artifacts.
type Store struct {
	dir      string
	staging  string
	maxSize  int64
	registry Registry
	logger   *slog.Logger

	// mu guards index.json and the blobs it references: readers (list,
	// inspect, extract, push) hold it shared; changes hold it exclusively
	// only to commit, after their blobs are written.
	mu sync.RWMutex
}

var _ core.Artifacts = (*Store)(nil)

// Open opens (creating if needed) the artifact layout, removes what an
// interrupted add or pull left in staging, and sweeps blobs no artifact
// references.
func Open(opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, errors.New("artifact store: a directory is required")
	}
	s := &Store{
		dir:      opts.Dir,
		staging:  opts.Dir + "-staging",
		maxSize:  opts.MaxFileSize,
		registry: opts.Registry,
		logger:   opts.Logger,
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if err := os.RemoveAll(s.staging); err != nil {
		return nil, fmt.Errorf("artifact store: clearing staging: %w", err)
	}
	for _, dir := range []string{s.blobDir(), s.staging} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("artifact store: %w", err)
		}
	}
	layout, err := json.Marshal(imgspecv1.ImageLayout{Version: imgspecv1.ImageLayoutVersion})
	if err != nil {
		return nil, err
	}
	if err := writeFileAtomic(filepath.Join(s.dir, imgspecv1.ImageLayoutFile), layout); err != nil {
		return nil, fmt.Errorf("artifact store: %w", err)
	}
	if _, err := os.Stat(s.indexPath()); errors.Is(err, fs.ErrNotExist) {
		if err := s.writeIndex(&imgspecv1.Index{}); err != nil {
			return nil, fmt.Errorf("artifact store: %w", err)
		}
	}
	if n, err := s.sweep(); err != nil {
		return nil, fmt.Errorf("artifact store: sweeping blobs: %w", err)
	} else if n > 0 {
		s.logger.Info("removed artifact blobs no artifact references", "blobs", n)
	}
	return s, nil
}

func (s *Store) indexPath() string { return filepath.Join(s.dir, imgspecv1.ImageIndexFile) }
func (s *Store) blobDir() string   { return filepath.Join(s.dir, imgspecv1.ImageBlobsDir, "sha256") }

// blobPath is where a blob with digest d is stored.
func (s *Store) blobPath(d digest.Digest) string { return filepath.Join(s.blobDir(), d.Encoded()) }

// readIndex reads index.json.
func (s *Store) readIndex() (*imgspecv1.Index, error) {
	raw, err := os.ReadFile(s.indexPath())
	if err != nil {
		return nil, fmt.Errorf("reading the artifact index: %w", err)
	}
	var index imgspecv1.Index
	if err := json.Unmarshal(raw, &index); err != nil {
		return nil, fmt.Errorf("decoding the artifact index: %w", err)
	}
	return &index, nil
}

// writeIndex replaces index.json atomically.
func (s *Store) writeIndex(index *imgspecv1.Index) error {
	index.SchemaVersion = 2
	index.MediaType = imgspecv1.MediaTypeImageIndex
	raw, err := json.Marshal(index)
	if err != nil {
		return err
	}
	return writeFileAtomic(s.indexPath(), raw)
}

// writeFileAtomic writes data to a temporary file beside path, syncs it and
// renames it over path, then syncs the directory.
func writeFileAtomic(path string, data []byte) error {
	return durable.WriteFile(path, data, 0o600, ".tmp-"+filepath.Base(path)+"-")
}

// entry is one artifact as the index names it, with its manifest.
type entry struct {
	name     string
	desc     imgspecv1.Descriptor
	manifest imgspecv1.Manifest
}

// artifact renders an entry in the domain's shape.
func (e *entry) artifact() core.Artifact {
	return core.Artifact{Name: e.name, Digest: e.desc.Digest.String(), Manifest: e.manifest}
}

// entries reads every artifact of index.
func (s *Store) entries(index *imgspecv1.Index) ([]*entry, error) {
	out := make([]*entry, 0, len(index.Manifests))
	for _, desc := range index.Manifests {
		raw, err := os.ReadFile(s.blobPath(desc.Digest))
		if err != nil {
			return nil, fmt.Errorf("reading the manifest of artifact %s: %w", desc.Annotations[imgspecv1.AnnotationRefName], err)
		}
		var m imgspecv1.Manifest
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("decoding the manifest of artifact %s: %w", desc.Annotations[imgspecv1.AnnotationRefName], err)
		}
		out = append(out, &entry{name: desc.Annotations[imgspecv1.AnnotationRefName], desc: desc, manifest: m})
	}
	return out, nil
}

// find returns the artifact named nameOrDigest: by name (":latest" added
// to an untagged name), else by manifest digest or a prefix of its hex.
func find(entries []*entry, nameOrDigest string) (*entry, error) {
	if nameOrDigest == "" {
		return nil, core.InvalidArgument("name", errors.New("an artifact name or digest is required"))
	}
	name := withDefaultTag(nameOrDigest)
	for _, e := range entries {
		if e.name == name || e.name == nameOrDigest {
			return e, nil
		}
	}
	hex := strings.TrimPrefix(nameOrDigest, "sha256:")
	if len(hex) >= 3 && strings.Trim(hex, "0123456789abcdef") == "" {
		var match *entry
		for _, e := range entries {
			if strings.HasPrefix(e.desc.Digest.Encoded(), hex) {
				if match != nil && match.desc.Digest != e.desc.Digest {
					return nil, fmt.Errorf("%q: %w", nameOrDigest, core.ErrAmbiguous)
				}
				match = e
			}
		}
		if match != nil {
			return match, nil
		}
	}
	return nil, core.NoSuchArtifact(nameOrDigest)
}

// withDefaultTag adds ":latest" to a name with neither tag nor digest.
func withDefaultTag(name string) string {
	if strings.Contains(name, "@") {
		return name
	}
	last := name[strings.LastIndex(name, "/")+1:]
	if strings.Contains(last, ":") {
		return name
	}
	return name + ":latest"
}

// artifactName validates a name for a new artifact and returns its stored
// form: the reference must be one a registry could hold.
func artifactName(name string) (string, error) {
	if name == "" {
		return "", core.InvalidArgument("name", errors.New("an artifact name is required"))
	}
	stored := withDefaultTag(name)
	if _, err := reference.ParseNormalizedNamed(stored); err != nil {
		return "", core.InvalidArgument("name", fmt.Errorf("%q: %w", name, err))
	}
	if strings.Contains(stored, "@") {
		return "", core.InvalidArgument("name", fmt.Errorf("%q: an artifact name cannot be a digest", name))
	}
	return stored, nil
}

// referenced returns the blobs the index's artifacts use.
func (s *Store) referenced(index *imgspecv1.Index) (map[string]bool, error) {
	entries, err := s.entries(index)
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	for _, e := range entries {
		used[e.desc.Digest.Encoded()] = true
		used[e.manifest.Config.Digest.Encoded()] = true
		for _, l := range e.manifest.Layers {
			used[l.Digest.Encoded()] = true
		}
	}
	return used, nil
}

// sweep removes blobs (and temporary files) no artifact references. The
// caller holds mu exclusively, or is Open.
func (s *Store) sweep() (int, error) {
	index, err := s.readIndex()
	if err != nil {
		return 0, err
	}
	used, err := s.referenced(index)
	if err != nil {
		return 0, err
	}
	files, err := os.ReadDir(s.blobDir())
	if err != nil {
		return 0, err
	}
	removed := 0
	for _, f := range files {
		if used[f.Name()] {
			continue
		}
		if err := os.Remove(filepath.Join(s.blobDir(), f.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, err
		}
		removed++
	}
	if dirFiles, err := os.ReadDir(s.dir); err == nil {
		for _, f := range dirFiles {
			if strings.HasPrefix(f.Name(), ".tmp-") {
				_ = os.Remove(filepath.Join(s.dir, f.Name()))
			}
		}
	}
	return removed, nil
}

// commit replaces the index entry named name with desc (or removes it when
// desc is nil), writes the index and sweeps the blobs it no longer uses. The
// caller holds mu exclusively.
func (s *Store) commit(index *imgspecv1.Index, name string, desc *imgspecv1.Descriptor) error {
	index.Manifests = slices.DeleteFunc(index.Manifests, func(d imgspecv1.Descriptor) bool {
		return d.Annotations[imgspecv1.AnnotationRefName] == name
	})
	if desc != nil {
		index.Manifests = append(index.Manifests, *desc)
	}
	if err := s.writeIndex(index); err != nil {
		return fmt.Errorf("saving the artifact index: %w", err)
	}
	if _, err := s.sweep(); err != nil {
		s.logger.Warn("sweeping artifact blobs", "error", err)
	}
	return nil
}

// emptyConfig is the config every artifact made here carries.
var emptyConfig = imgspecv1.DescriptorEmptyJSON

// newManifest returns an empty artifact manifest.
func newManifest(artifactType string) imgspecv1.Manifest {
	return imgspecv1.Manifest{
		Versioned:    imgspec.Versioned{SchemaVersion: 2},
		MediaType:    imgspecv1.MediaTypeImageManifest,
		ArtifactType: artifactType,
		Config:       emptyConfig,
		Layers:       []imgspecv1.Descriptor{},
	}
}
