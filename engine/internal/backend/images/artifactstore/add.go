package artifactstore

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/opencontainers/go-digest"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-project/berth/engine/internal/backend/platform/sizelimit"
	"github.com/berth-project/berth/engine/internal/core"
)

// stagedBlob is a file received into staging, not yet in the layout.
type stagedBlob struct {
	path      string
	digest    digest.Digest
	size      int64
	mediaType string
}

// Add implements core.Artifacts.
func (s *Store) Add(ctx context.Context, opts core.ArtifactAddOptions, body io.Reader) (string, error) {
	name, err := s.checkAdd(opts)
	if err != nil {
		return "", err
	}
	blob, err := s.receive(ctx, body, opts.FileMIMEType)
	if err != nil {
		return "", err
	}
	defer os.Remove(blob.path)
	return s.addBlob(name, opts, blob)
}

// AddLocal implements core.Artifacts: path must be absolute and name a
// regular file (not a symbolic link, directory or device).
func (s *Store) AddLocal(ctx context.Context, opts core.ArtifactAddOptions, path string) (string, error) {
	if path == "" || !filepath.IsAbs(path) {
		return "", core.InvalidArgument("path", fmt.Errorf("%q is not an absolute path", path))
	}
	name, err := s.checkAdd(opts)
	if err != nil {
		return "", err
	}
	f, err := os.OpenFile(filepath.Clean(path), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", core.InvalidArgument("path", fmt.Errorf("%q: %w", path, err))
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", core.InvalidArgument("path", fmt.Errorf("%q: %w", path, err))
	}
	if !info.Mode().IsRegular() {
		return "", core.InvalidArgument("path", fmt.Errorf("%q is not a regular file", path))
	}
	blob, err := s.receive(ctx, f, opts.FileMIMEType)
	if err != nil {
		return "", err
	}
	defer os.Remove(blob.path)
	return s.addBlob(name, opts, blob)
}

// checkAdd validates an add's options and, before any byte is read, that
// the artifact's presence allows it. It returns the artifact's stored name.
func (s *Store) checkAdd(opts core.ArtifactAddOptions) (string, error) {
	name, err := artifactName(opts.Name)
	if err != nil {
		return "", err
	}
	switch {
	case opts.FileName == "":
		return "", core.InvalidArgument("fileName", errors.New("a file name is required"))
	case strings.ContainsAny(opts.FileName, "/\x00") || opts.FileName == "." || opts.FileName == "..":
		return "", core.InvalidArgument("fileName", fmt.Errorf("%q must be a plain file name", opts.FileName))
	case opts.Append && opts.Replace:
		return "", core.InvalidArgument("replace", errors.New("append and replace cannot be combined"))
	}
	if _, titled := opts.Annotations[imgspecv1.AnnotationTitle]; titled {
		return "", core.InvalidArgument("annotations", fmt.Errorf("%s is set from fileName", imgspecv1.AnnotationTitle))
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, entries, err := s.indexLocked()
	if err != nil {
		return "", err
	}
	_, err = admit(entries, name, opts)
	return name, err
}

// admit decides whether an add may go on, given the artifacts now stored:
// a new name needs neither append nor an existing artifact; append needs the
// artifact, the same artifact type and a file name it does not have yet;
// an existing name needs append or replace. It returns the manifest the new
// file is added to.
func admit(entries []*entry, name string, opts core.ArtifactAddOptions) (imgspecv1.Manifest, error) {
	var existing *entry
	for _, e := range entries {
		if e.name == name {
			existing = e
		}
	}
	switch {
	case existing == nil && opts.Append:
		return imgspecv1.Manifest{}, fmt.Errorf("%s: %w (append needs an existing artifact)", name, core.ErrNoSuchArtifact)
	case existing == nil || opts.Replace:
		return newManifest(opts.ArtifactMIMEType), nil
	case !opts.Append:
		return imgspecv1.Manifest{}, fmt.Errorf("artifact %s: %w (append or replace it)", name, core.ErrNameInUse)
	}
	m := existing.manifest
	if opts.ArtifactMIMEType != "" && opts.ArtifactMIMEType != m.ArtifactType {
		return m, core.InvalidArgument("artifactMIMEType", fmt.Errorf("%q differs from the artifact's type %q", opts.ArtifactMIMEType, m.ArtifactType))
	}
	for _, l := range m.Layers {
		if l.Annotations[imgspecv1.AnnotationTitle] == opts.FileName {
			return m, fmt.Errorf("artifact %s already has a file %s: %w", name, opts.FileName, core.ErrNameInUse)
		}
	}
	m.Layers = append([]imgspecv1.Descriptor(nil), m.Layers...)
	return m, nil
}

// receive copies r into a staging file, hashing it, and detects its media
// type from its first bytes unless mediaType is given. More than the store's
// size bound is refused (core.ErrTooLarge, through sizelimit).
func (s *Store) receive(ctx context.Context, r io.Reader, mediaType string) (*stagedBlob, error) {
	f, err := os.CreateTemp(s.staging, "add-")
	if err != nil {
		return nil, fmt.Errorf("receiving the artifact file: %w", err)
	}
	hash := sha256.New()
	bounded := sizelimit.New(s.maxSize, "artifact file").Reader(ctx, r)
	head := make([]byte, 512)
	n, err := io.ReadFull(bounded, head)
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		err = nil
	}
	head = head[:n]
	var size int64
	if err == nil {
		var written int
		written, err = f.Write(head)
		size = int64(written)
	}
	if err == nil {
		hash.Write(head)
		var copied int64
		copied, err = io.Copy(io.MultiWriter(f, hash), bounded)
		size += copied
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, core.ErrTooLarge) {
			return nil, err
		}
		return nil, fmt.Errorf("receiving the artifact file: %w", err)
	}
	if mediaType == "" {
		mediaType = http.DetectContentType(head)
	}
	return &stagedBlob{path: f.Name(), digest: digest.NewDigest(digest.SHA256, hash), size: size, mediaType: mediaType}, nil
}

// addBlob commits a received file: under the exclusive lock it checks the
// add is still allowed, moves the file into the layout, writes the new
// manifest and switches the index to it.
func (s *Store) addBlob(name string, opts core.ArtifactAddOptions, blob *stagedBlob) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	index, entries, err := s.indexLocked()
	if err != nil {
		return "", err
	}
	m, err := admit(entries, name, opts)
	if err != nil {
		return "", err
	}
	annotations := maps.Clone(opts.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[imgspecv1.AnnotationTitle] = opts.FileName
	m.Layers = append(m.Layers, imgspecv1.Descriptor{
		MediaType:   blob.mediaType,
		Digest:      blob.digest,
		Size:        blob.size,
		Annotations: annotations,
	})
	if err := s.placeBlob(blob.path, blob.digest); err != nil {
		return "", err
	}
	desc, err := s.putManifest(name, m)
	if err != nil {
		return "", err
	}
	if err := s.commit(index, name, desc); err != nil {
		return "", err
	}
	return desc.Digest.String(), nil
}

// placeBlob moves a staged file into the layout under its digest (keeping
// the copy already there). The caller holds mu exclusively.
func (s *Store) placeBlob(path string, d digest.Digest) error {
	target := s.blobPath(d)
	if _, err := os.Stat(target); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	// Readable by all, as Podman's store keeps blobs: a container mounts
	// them (see Files).
	if err := os.Chmod(path, 0o644); err != nil {
		return fmt.Errorf("storing blob %s: %w", d, err)
	}
	if err := os.Rename(path, target); err != nil {
		return fmt.Errorf("storing blob %s: %w", d, err)
	}
	return nil
}

// putManifest writes an artifact's manifest and config blobs and returns
// the manifest's index descriptor. The caller holds mu exclusively.
func (s *Store) putManifest(name string, m imgspecv1.Manifest) (*imgspecv1.Descriptor, error) {
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	d := digest.FromBytes(raw)
	for _, blob := range []struct {
		digest digest.Digest
		data   []byte
	}{{m.Config.Digest, m.Config.Data}, {d, raw}} {
		if blob.digest == emptyConfig.Digest {
			blob.data = emptyConfig.Data
		}
		if _, err := os.Stat(s.blobPath(blob.digest)); err == nil {
			continue
		}
		if blob.data == nil {
			return nil, fmt.Errorf("artifact %s: config blob %s is missing", name, blob.digest)
		}
		if err := writeFileAtomic(s.blobPath(blob.digest), blob.data); err != nil {
			return nil, fmt.Errorf("storing blob %s: %w", blob.digest, err)
		}
	}
	return &imgspecv1.Descriptor{
		MediaType:   imgspecv1.MediaTypeImageManifest,
		Digest:      d,
		Size:        int64(len(raw)),
		Annotations: map[string]string{imgspecv1.AnnotationRefName: name},
	}, nil
}
