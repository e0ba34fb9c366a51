package artifactstore

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-project/berth/engine/internal/backend/platform/ioctx"
	"github.com/berth-project/berth/engine/internal/core"
)

// snapshot reads the index and every artifact under the shared lock.
func (s *Store) snapshot() ([]*entry, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, entries, err := s.indexLocked()
	return entries, err
}

// indexLocked reads the index and the artifacts it names; the caller
// holds mu.
func (s *Store) indexLocked() (*imgspecv1.Index, []*entry, error) {
	index, err := s.readIndex()
	if err != nil {
		return nil, nil, err
	}
	entries, err := s.entries(index)
	return index, entries, err
}

// List implements core.Artifacts.
func (s *Store) List(ctx context.Context) ([]core.Artifact, error) {
	entries, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	out := make([]core.Artifact, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.artifact())
	}
	return out, nil
}

// lookup finds one artifact, by name or digest, in a snapshot of the store.
func (s *Store) lookup(nameOrDigest string) (*entry, error) {
	entries, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	return find(entries, nameOrDigest)
}

// Inspect implements core.Artifacts.
func (s *Store) Inspect(ctx context.Context, nameOrDigest string) (*core.Artifact, error) {
	e, err := s.lookup(nameOrDigest)
	if err != nil {
		return nil, err
	}
	a := e.artifact()
	return &a, nil
}

// Remove implements core.Artifacts: every named artifact goes in one index
// write (with Ignore, unknown names are skipped; without, nothing is
// removed when one is unknown).
func (s *Store) Remove(ctx context.Context, namesOrDigests []string, opts core.ArtifactRemoveOptions) ([]string, error) {
	switch {
	case opts.All && len(namesOrDigests) > 0:
		return nil, core.InvalidArgument("artifacts", errors.New("names cannot be combined with all"))
	case !opts.All && len(namesOrDigests) == 0:
		return nil, core.InvalidArgument("artifacts", errors.New("name an artifact or set all"))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	index, entries, err := s.indexLocked()
	if err != nil {
		return nil, err
	}
	targets := entries
	if !opts.All {
		targets = nil
		for _, name := range namesOrDigests {
			e, err := find(entries, name)
			if errors.Is(err, core.ErrNoSuchArtifact) && opts.Ignore {
				continue
			}
			if err != nil {
				return nil, err
			}
			targets = append(targets, e)
		}
	}
	removed := []string{}
	gone := map[string]bool{}
	for _, e := range targets {
		if gone[e.name] {
			continue
		}
		gone[e.name] = true
		removed = append(removed, e.desc.Digest.String())
	}
	if len(gone) == 0 {
		return removed, nil
	}
	kept := index.Manifests[:0]
	for _, d := range index.Manifests {
		if !gone[d.Annotations[imgspecv1.AnnotationRefName]] {
			kept = append(kept, d)
		}
	}
	index.Manifests = kept
	if err := s.commit(index, "", nil); err != nil {
		return nil, err
	}
	return removed, nil
}

// extractFile is one file an extraction writes.
type extractFile struct {
	name   string
	digest digest.Digest
	size   int64
}

// Extract implements core.Artifacts. Files are named by their title (or
// their digest, "sha256-<hex>", when untitled); a title or digest selects
// one file. The returned writer holds the shared lock while it writes, so
// a concurrent removal waits.
func (s *Store) Extract(ctx context.Context, nameOrDigest string, opts core.ArtifactExtractOptions) (func(io.Writer) error, error) {
	_, files, err := s.selectFiles(nameOrDigest, opts)
	if err != nil {
		return nil, err
	}
	if opts.ExcludeTitle && len(files) == 1 {
		files[0].name = ""
	}
	return func(w io.Writer) error { return s.writeTar(ctx, w, files) }, nil
}

// Files implements core.Artifacts: the files Extract would write, named as
// it names them, at their blobs. Two files of one name are refused, as a
// mount could not hold both. Each blob is made readable by all, as Podman's
// store keeps them: a container's process that is not the host's root
// reads the file through its bind.
func (s *Store) Files(ctx context.Context, nameOrDigest string, opts core.ArtifactExtractOptions) ([]core.ArtifactFile, error) {
	e, files, err := s.selectFiles(nameOrDigest, opts)
	if err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	seen := map[string]bool{}
	out := make([]core.ArtifactFile, 0, len(files))
	for _, f := range files {
		if seen[f.name] {
			return nil, fmt.Errorf("artifact %s has several files named %q", e.name, f.name)
		}
		seen[f.name] = true
		path := s.blobPath(f.digest)
		fi, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("artifact %s: blob %s: %w", e.name, f.digest, err)
		}
		if fi.Mode().Perm()&0o444 != 0o444 {
			if err := os.Chmod(path, 0o644); err != nil {
				return nil, err
			}
		}
		out = append(out, core.ArtifactFile{Name: f.name, Path: path})
	}
	return out, nil
}

// selectFiles finds an artifact and the files of it that opts select.
func (s *Store) selectFiles(nameOrDigest string, opts core.ArtifactExtractOptions) (*entry, []extractFile, error) {
	if opts.Title != "" && opts.Digest != "" {
		return nil, nil, core.InvalidArgument("digest", errors.New("title and digest cannot be combined"))
	}
	e, err := s.lookup(nameOrDigest)
	if err != nil {
		return nil, nil, err
	}
	if len(e.manifest.Layers) == 0 {
		return nil, nil, fmt.Errorf("artifact %s has no files: %w", e.name, core.ErrNoSuchArtifact)
	}
	var files []extractFile
	for _, l := range e.manifest.Layers {
		title := l.Annotations[imgspecv1.AnnotationTitle]
		if (opts.Title != "" && title != opts.Title) || (opts.Digest != "" && l.Digest.String() != opts.Digest) {
			continue
		}
		name := title
		if name == "" || opts.Digest != "" {
			name = strings.ReplaceAll(l.Digest.String(), ":", "-")
		}
		if strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
			return nil, nil, fmt.Errorf("artifact %s: file title %q is not a plain file name", e.name, name)
		}
		files = append(files, extractFile{name: name, digest: l.Digest, size: l.Size})
	}
	switch {
	case len(files) == 0 && opts.Title != "":
		return nil, nil, fmt.Errorf("artifact %s has no file titled %q: %w", e.name, opts.Title, core.ErrNoSuchArtifact)
	case len(files) == 0:
		return nil, nil, fmt.Errorf("artifact %s has no file with digest %s: %w", e.name, opts.Digest, core.ErrNoSuchArtifact)
	case len(files) > 1 && (opts.Title != "" || opts.Digest != ""):
		return nil, nil, core.InvalidArgument("title", fmt.Errorf("artifact %s has several matching files", e.name))
	}
	return e, files, nil
}

// writeTar writes files as a tar stream.
func (s *Store) writeTar(ctx context.Context, w io.Writer, files []extractFile) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	tw := tar.NewWriter(w)
	now := time.Now()
	for _, f := range files {
		blob, err := os.Open(s.blobPath(f.digest))
		if err != nil {
			return fmt.Errorf("reading blob %s: %w", f.digest, err)
		}
		err = tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o600, Size: f.size, ModTime: now, Typeflag: tar.TypeReg})
		if err == nil {
			_, err = io.Copy(tw, ioctx.Reader(ctx, blob))
		}
		blob.Close()
		if err != nil {
			return fmt.Errorf("writing %s: %w", f.name, err)
		}
	}
	return tw.Close()
}
