package artifactstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/containers/image/v5/copy"
	"github.com/containers/image/v5/docker"
	"github.com/containers/image/v5/docker/reference"
	"github.com/containers/image/v5/manifest"
	"github.com/containers/image/v5/oci/layout"
	"github.com/containers/image/v5/types"
	"github.com/opencontainers/go-digest"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-project/berth/engine/internal/core"
)

// Registry is what the store needs to move artifacts to and from
// registries: the engine's registry contexts (credentials, TLS) and its
// copy (signature policy). The image transfer backend provides it.
type Registry interface {
	// RegistryContext returns a system context for the client's credentials
	// and TLS choice; cleanup removes what it wrote.
	RegistryContext(auth *core.RegistryAuth, tlsVerify *bool) (sys *types.SystemContext, cleanup func(), err error)
	// Copy runs copy.Image under the engine's signature policy.
	Copy(ctx context.Context, dest, src types.ImageReference, opts *copy.Options) ([]byte, error)
	// ClassifyError maps a registry error to the engine's domain errors.
	ClassifyError(err error) error
}

// defaultRetries is how often a failed transfer is retried when the client
// does not say (as Podman does).
const defaultRetries = 3

// registryRef parses an artifact name as a registry reference.
func registryRef(name string) (types.ImageReference, error) {
	named, err := reference.ParseNormalizedNamed(name)
	if err != nil {
		return nil, core.InvalidArgument("name", fmt.Errorf("%q: %w", name, err))
	}
	ref, err := docker.NewReference(reference.TagNameOnly(named))
	if err != nil {
		return nil, core.InvalidArgument("name", err)
	}
	return ref, nil
}

// withRetry runs op, retrying failures that are not the client's fault.
func withRetry(ctx context.Context, opts core.ArtifactTransferOptions, op func() error) error {
	retries := uint(defaultRetries)
	if opts.Retry != nil {
		retries = *opts.Retry
	}
	delay := time.Second
	fixed := false
	if opts.RetryDelay != "" {
		d, err := time.ParseDuration(opts.RetryDelay)
		if err != nil || d < 0 {
			return core.InvalidArgument("retryDelay", fmt.Errorf("%q is not a duration", opts.RetryDelay))
		}
		delay, fixed = d, true
	}
	for attempt := uint(0); ; attempt++ {
		err := op()
		if err == nil || attempt >= retries || ctx.Err() != nil || !retryable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		if !fixed {
			delay *= 2
		}
	}
}

// retryable reports whether a transfer error may go away by itself.
func retryable(err error) bool {
	var unauthorized docker.ErrUnauthorizedForCredentials
	return !errors.Is(err, core.ErrInvalidArgument) && !errors.Is(err, core.ErrNoSuchImage) &&
		!errors.Is(err, core.ErrNoSuchArtifact) && !errors.As(err, &unauthorized)
}

// Push implements core.Artifacts: the artifact goes to the registry its
// name points at, read from the layout by containers/image's oci transport.
func (s *Store) Push(ctx context.Context, name string, opts core.ArtifactTransferOptions) (string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	index, entries, err := s.indexLocked()
	if err != nil {
		return "", err
	}
	e, err := find(entries, name)
	if err != nil {
		return "", err
	}
	dest, err := registryRef(e.name)
	if err != nil {
		return "", err
	}
	position := -1
	for i, d := range index.Manifests {
		if d.Digest == e.desc.Digest && d.Annotations[imgspecv1.AnnotationRefName] == e.name {
			position = i
		}
	}
	src, err := layout.NewIndexReference(s.dir, position)
	if err != nil {
		return "", err
	}
	pushed, err := s.copyWithRetry(ctx, opts, dest, src, "pushing artifact "+e.name)
	if err != nil {
		return "", err
	}
	return digest.FromBytes(pushed).String(), nil
}

// copyWithRetry copies src to dest (a push or a pull) with the registry
// context opts asks for, retried as opts asks; what names the copy in its
// error. It returns the manifest copied.
func (s *Store) copyWithRetry(ctx context.Context, opts core.ArtifactTransferOptions, dest, src types.ImageReference, what string) ([]byte, error) {
	sys, cleanup, err := s.registry.RegistryContext(opts.Auth, opts.TLSVerify)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	var copied []byte
	err = withRetry(ctx, opts, func() error {
		var err error
		copied, err = s.registry.Copy(ctx, dest, src, &copy.Options{SourceCtx: sys, DestinationCtx: sys})
		if err != nil {
			return s.registry.ClassifyError(fmt.Errorf("%s: %w", what, err))
		}
		return nil
	})
	return copied, err
}

// Pull implements core.Artifacts: the artifact is copied into a staging
// layout, then its blobs move into the store and the index switches to it
// in one commit. An artifact of the same name is replaced.
func (s *Store) Pull(ctx context.Context, name string, opts core.ArtifactTransferOptions) (string, error) {
	stored, err := artifactName(name)
	if err != nil {
		return "", err
	}
	src, err := registryRef(stored)
	if err != nil {
		return "", err
	}
	staging, err := os.MkdirTemp(s.staging, "pull-")
	if err != nil {
		return "", fmt.Errorf("pulling artifact %s: %w", stored, err)
	}
	defer os.RemoveAll(staging)
	dest, err := layout.NewReference(staging, "")
	if err != nil {
		return "", err
	}
	raw, err := s.copyWithRetry(ctx, opts, dest, src, "pulling artifact "+stored)
	if err != nil {
		return "", err
	}
	if mimeType := manifest.GuessMIMEType(raw); mimeType != imgspecv1.MediaTypeImageManifest {
		return "", fmt.Errorf("pulling artifact %s: the registry's manifest is %s, not an OCI manifest", stored, mimeType)
	}
	var m imgspecv1.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", fmt.Errorf("pulling artifact %s: %w", stored, err)
	}
	return s.commitPulled(stored, staging, raw, m)
}

// commitPulled moves a pulled artifact's blobs from its staging layout into
// the store and names it in the index.
func (s *Store) commitPulled(name, staging string, raw []byte, m imgspecv1.Manifest) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	index, err := s.readIndex()
	if err != nil {
		return "", err
	}
	d := digest.FromBytes(raw)
	blobs := append([]imgspecv1.Descriptor{m.Config}, m.Layers...)
	for _, b := range blobs {
		if err := s.placeBlob(filepath.Join(staging, imgspecv1.ImageBlobsDir, b.Digest.Algorithm().String(), b.Digest.Encoded()), b.Digest); err != nil {
			return "", err
		}
	}
	if err := writeFileAtomic(s.blobPath(d), raw); err != nil {
		return "", fmt.Errorf("storing the manifest of artifact %s: %w", name, err)
	}
	desc := &imgspecv1.Descriptor{
		MediaType:   imgspecv1.MediaTypeImageManifest,
		Digest:      d,
		Size:        int64(len(raw)),
		Annotations: map[string]string{imgspecv1.AnnotationRefName: name},
	}
	if err := s.commit(index, name, desc); err != nil {
		return "", err
	}
	return d.String(), nil
}
