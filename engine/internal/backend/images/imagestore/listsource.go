package imagestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/containers/image/v5/docker"
	"github.com/containers/image/v5/docker/reference"
	"github.com/containers/image/v5/manifest"
	istorage "github.com/containers/image/v5/storage"
	"github.com/containers/image/v5/types"
	"github.com/containers/storage"
	"github.com/opencontainers/go-digest"
)

// listTransport names the source a manifest list is pushed from. It is
// never registered: references are only made by the push itself.
type listTransport struct{}

func (listTransport) Name() string { return "berth-manifest-list" }

func (listTransport) ParseReference(string) (types.ImageReference, error) {
	return nil, errors.New("manifest list references are not parsed")
}

func (listTransport) ValidatePolicyConfigurationScope(string) error { return nil }

// listReference is a local manifest list as a copy source: the list's
// manifest, and each instance's manifest and blobs read from where the
// instance was added from (local storage or its registry).
type listReference struct {
	name  string
	state *listState
	store storage.Store
}

func (r *listReference) Transport() types.ImageTransport     { return listTransport{} }
func (r *listReference) StringWithinTransport() string       { return r.name }
func (r *listReference) DockerReference() reference.Named    { return nil }
func (r *listReference) PolicyConfigurationIdentity() string { return "" }
func (r *listReference) PolicyConfigurationNamespaces() []string {
	return nil
}

func (r *listReference) NewImage(context.Context, *types.SystemContext) (types.ImageCloser, error) {
	return nil, errors.New("a manifest list is not an image")
}

func (r *listReference) NewImageDestination(context.Context, *types.SystemContext) (types.ImageDestination, error) {
	return nil, errors.New("a manifest list source cannot be written")
}

func (r *listReference) DeleteImage(context.Context, *types.SystemContext) error {
	return errors.New("a manifest list source cannot be deleted")
}

// NewImageSource opens every instance's source and indexes which source
// holds which blob.
func (r *listReference) NewImageSource(ctx context.Context, sys *types.SystemContext) (types.ImageSource, error) {
	raw, err := r.state.serialize()
	if err != nil {
		return nil, err
	}
	src := &listSource{ref: r, raw: raw, mimeType: manifest.GuessMIMEType(raw),
		instances: map[digest.Digest]types.ImageSource{}, blobs: map[digest.Digest]types.ImageSource{}}
	for _, e := range r.state.Entries {
		inst, err := r.openInstance(ctx, sys, e.Digest)
		if err != nil {
			src.Close()
			return nil, err
		}
		src.instances[e.Digest] = inst
		if err := src.indexBlobs(ctx, inst); err != nil {
			src.Close()
			return nil, fmt.Errorf("instance %s: %w", e.Digest, err)
		}
	}
	return src, nil
}

// openInstance opens the source an instance was added from.
func (r *listReference) openInstance(ctx context.Context, sys *types.SystemContext, d digest.Digest) (types.ImageSource, error) {
	origin := r.state.Sources[d]
	var ref types.ImageReference
	var err error
	switch {
	case strings.HasPrefix(origin, "containers-storage:"):
		ref, err = istorage.Transport.NewStoreReference(r.store, nil, strings.TrimPrefix(origin, "containers-storage:"))
	case strings.HasPrefix(origin, "docker://"):
		var named reference.Named
		if named, err = reference.ParseNormalizedNamed(strings.TrimPrefix(origin, "docker://")); err == nil {
			ref, err = docker.NewReference(named)
		}
	default:
		err = fmt.Errorf("no source recorded for instance %s", d)
	}
	if err != nil {
		return nil, err
	}
	src, err := ref.NewImageSource(ctx, sys)
	if err != nil {
		return nil, fmt.Errorf("opening instance %s (%s): %w", d, origin, err)
	}
	return src, nil
}

// listSource serves a manifest list and its instances.
type listSource struct {
	ref       *listReference
	raw       []byte
	mimeType  string
	instances map[digest.Digest]types.ImageSource
	blobs     map[digest.Digest]types.ImageSource
}

// indexBlobs records which blobs an instance source serves: those its
// manifest names and those it offers for copying (storage may offer
// uncompressed layers in place of the manifest's compressed ones).
func (s *listSource) indexBlobs(ctx context.Context, inst types.ImageSource) error {
	raw, mimeType, err := inst.GetManifest(ctx, nil)
	if err != nil {
		return err
	}
	m, err := manifest.FromBlob(raw, mimeType)
	if err != nil {
		return err
	}
	s.blobs[m.ConfigInfo().Digest] = inst
	for _, l := range m.LayerInfos() {
		s.blobs[l.Digest] = inst
	}
	forCopy, err := inst.LayerInfosForCopy(ctx, nil)
	if err != nil {
		return err
	}
	for _, l := range forCopy {
		s.blobs[l.Digest] = inst
	}
	return nil
}

func (s *listSource) Reference() types.ImageReference { return s.ref }

func (s *listSource) Close() error {
	var errs []error
	for _, inst := range s.instances {
		errs = append(errs, inst.Close())
	}
	return errors.Join(errs...)
}

// instance returns the source of an instance digest.
func (s *listSource) instance(d *digest.Digest) (types.ImageSource, error) {
	inst, ok := s.instances[*d]
	if !ok {
		return nil, fmt.Errorf("instance %s is not in the list", d)
	}
	return inst, nil
}

func (s *listSource) GetManifest(ctx context.Context, instanceDigest *digest.Digest) ([]byte, string, error) {
	if instanceDigest == nil {
		return s.raw, s.mimeType, nil
	}
	inst, err := s.instance(instanceDigest)
	if err != nil {
		return nil, "", err
	}
	return inst.GetManifest(ctx, nil)
}

func (s *listSource) GetBlob(ctx context.Context, info types.BlobInfo, cache types.BlobInfoCache) (io.ReadCloser, int64, error) {
	inst, ok := s.blobs[info.Digest]
	if !ok {
		return nil, -1, fmt.Errorf("blob %s belongs to no instance of the list", info.Digest)
	}
	return inst.GetBlob(ctx, info, cache)
}

func (s *listSource) HasThreadSafeGetBlob() bool { return false }

func (s *listSource) GetSignatures(ctx context.Context, instanceDigest *digest.Digest) ([][]byte, error) {
	if instanceDigest == nil {
		return nil, nil
	}
	inst, err := s.instance(instanceDigest)
	if err != nil {
		return nil, err
	}
	return inst.GetSignatures(ctx, nil)
}

func (s *listSource) LayerInfosForCopy(ctx context.Context, instanceDigest *digest.Digest) ([]types.BlobInfo, error) {
	if instanceDigest == nil {
		return nil, nil
	}
	inst, err := s.instance(instanceDigest)
	if err != nil {
		return nil, err
	}
	return inst.LayerInfosForCopy(ctx, nil)
}
