package imagestore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/containers/image/v5/docker/reference"
	"github.com/containers/storage"
	"github.com/containers/storage/pkg/truncindex"
	"github.com/opencontainers/go-digest"

	"github.com/berth-project/berth/engine/internal/core"
)

// hexID matches a full or abbreviated image ID.
var hexID = regexp.MustCompile(`^[a-f0-9]{1,64}$`)

// Lookup finds one image by name or ID and returns it with its configuration.
func (s *Store) Lookup(ctx context.Context, nameOrID string) (*core.Image, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	img, err := s.findNamed(nameOrID)
	if err != nil {
		return nil, err
	}
	return s.describe(img)
}

// lookupToSave is Lookup with the words of Podman's save for a name that
// matches no image ("X: image not known").
func (s *Store) lookupToSave(nameOrID string) (*core.Image, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	img, err := s.find(nameOrID)
	if err != nil {
		return nil, err
	}
	return s.describe(img)
}

// findNamed is find as Podman's image lookups answer a name that matches
// no image: "failed to find image X: X: image not known" (removals say
// only "X: image not known").
func (s *Store) findNamed(nameOrID string) (*storage.Image, error) {
	img, err := s.find(nameOrID)
	if errors.Is(err, core.ErrNoSuchImage) {
		err = fmt.Errorf("failed to find image %s: %w", nameOrID, err)
	}
	return img, err
}

// find resolves nameOrID to a storage image. It tries, in order: the exact
// stored name or ID (or a unique ID prefix), then the name normalized into
// the candidates a short name stands for (localhost/, the search registries,
// docker.io), then images whose repository path ends in the short name.
func (s *Store) find(nameOrID string) (*storage.Image, error) {
	if nameOrID == "" {
		return nil, core.InvalidArgument("image name", errors.New("name or ID is empty"))
	}
	name := nameOrID
	if strings.HasPrefix(name, "sha256:") && hexID.MatchString(strings.TrimPrefix(name, "sha256:")) {
		name = strings.TrimPrefix(name, "sha256:")
	}
	if img, err := s.store.Image(name); err == nil {
		return img, nil
	} else if ambiguous := (truncindex.ErrAmbiguousPrefix{}); errors.As(err, &ambiguous) {
		return nil, fmt.Errorf("%q: %w", nameOrID, core.ErrAmbiguous)
	} else if !errors.Is(err, storage.ErrImageUnknown) {
		return nil, fmt.Errorf("looking up image %q: %w", nameOrID, err)
	}
	if hexID.MatchString(name) && len(name) == 64 {
		return nil, core.NoSuchImage(nameOrID)
	}

	ref, err := ParseReference(name)
	if err != nil {
		return nil, err
	}
	for _, candidate := range s.candidates(ref) {
		if img, err := s.store.Image(candidate.String()); err == nil {
			if canonical, ok := candidate.(reference.Canonical); ok && !imageHasDigest(img, canonical.Digest()) {
				continue
			}
			return img, nil
		}
		if canonical, ok := candidate.(reference.Canonical); ok {
			if img := s.findByDigest(canonical); img != nil {
				return img, nil
			}
		}
	}
	if ref.Short {
		if img, err := s.findBySuffix(ref); err != nil || img != nil {
			return img, err
		}
	}
	return nil, core.NoSuchImage(nameOrID)
}

// Reference is a parsed image reference and whether it was written without a registry.
type Reference struct {
	// Named is the normalized reference (docker.io/library/ added to short names),
	// with a tag ("latest" when neither tag nor digest was given).
	Named reference.Named
	// Short is true when the input named no registry ("busybox", "app/x:1").
	Short bool
	// Path is the repository path as written, without registry, tag or digest.
	Path string
}

// ParseReference parses an image name as users write it. A malformed name is
// an ErrInvalidArgument about "reference".
func ParseReference(name string) (Reference, error) {
	if name == "" {
		return Reference{}, core.InvalidArgument("reference", errors.New("empty image reference"))
	}
	named, err := reference.ParseNormalizedNamed(name)
	if err != nil {
		return Reference{}, core.InvalidArgument("reference", fmt.Errorf("%q: %w", name, err))
	}
	named = reference.TagNameOnly(named)
	short := !hasDomain(name)
	path := reference.Path(named)
	if short {
		// Keep the path as written: docker.io's "library/" must not leak into
		// the localhost/ and search-registry candidates.
		repo := name
		if i := strings.IndexAny(repo, "@"); i >= 0 {
			repo = repo[:i]
		}
		if i := strings.LastIndex(repo, ":"); i >= 0 && !strings.Contains(repo[i:], "/") {
			repo = repo[:i]
		}
		path = repo
	}
	return Reference{Named: named, Short: short, Path: path}, nil
}

// hasDomain reports whether name starts with a registry host, by the same rule
// as the docker reference grammar: the first component has a dot or a port, or
// is "localhost".
func hasDomain(name string) bool {
	first, _, found := strings.Cut(name, "/")
	if !found {
		return false
	}
	return strings.ContainsAny(first, ".:") || first == "localhost"
}

// candidates lists the fully qualified names a reference may stand for.
func (s *Store) candidates(ref Reference) []reference.Named {
	if !ref.Short {
		return []reference.Named{ref.Named}
	}
	var out []reference.Named
	prefixes := append([]string{"localhost"}, s.searchRegs...)
	for _, prefix := range prefixes {
		if named, err := withSuffix(prefix+"/"+ref.Path, ref.Named); err == nil {
			out = append(out, named)
		}
	}
	return append(out, ref.Named)
}

// withSuffix builds repo with the tag and digest of from.
func withSuffix(repo string, from reference.Named) (reference.Named, error) {
	named, err := reference.ParseNamed(repo)
	if err != nil {
		return nil, err
	}
	if tagged, ok := from.(reference.Tagged); ok {
		if named, err = reference.WithTag(named, tagged.Tag()); err != nil {
			return nil, err
		}
	}
	if canonical, ok := from.(reference.Canonical); ok {
		if named, err = reference.WithDigest(named, canonical.Digest()); err != nil {
			return nil, err
		}
	}
	return named, nil
}

// findByDigest finds an image stored under ref's repository with ref's digest.
func (s *Store) findByDigest(ref reference.Canonical) *storage.Image {
	images, err := s.store.ImagesByDigest(ref.Digest())
	if err != nil {
		return nil
	}
	repo := ref.Name()
	for _, img := range images {
		for _, name := range img.Names {
			if named, err := reference.ParseNormalizedNamed(name); err == nil && named.Name() == repo {
				return img
			}
		}
	}
	return nil
}

// findBySuffix finds a tagged image whose repository ends in "/"+path, the
// last resort for short names ("busybox" finds "quay.io/x/busybox:latest").
func (s *Store) findBySuffix(ref Reference) (*storage.Image, error) {
	images, err := s.store.Images()
	if err != nil {
		return nil, fmt.Errorf("listing images: %w", err)
	}
	tag := ""
	if tagged, ok := ref.Named.(reference.Tagged); ok {
		tag = tagged.Tag()
	}
	var dgst digest.Digest
	if canonical, ok := ref.Named.(reference.Canonical); ok {
		dgst = canonical.Digest()
	}
	var found *storage.Image
	for i := range images {
		img := &images[i]
		for _, name := range img.Names {
			named, err := reference.ParseNormalizedNamed(name)
			if err != nil {
				continue
			}
			if !strings.HasSuffix(named.Name(), "/"+ref.Path) {
				continue
			}
			if dgst != "" {
				if !imageHasDigest(img, dgst) {
					continue
				}
			} else if tagged, ok := named.(reference.Tagged); !ok || tagged.Tag() != tag {
				continue
			}
			if found != nil && found.ID != img.ID {
				return nil, fmt.Errorf("%s matches images %s and %s: %w", ref.Path, shortID(found.ID), shortID(img.ID), core.ErrAmbiguous)
			}
			found = img
		}
	}
	return found, nil
}

// imageHasDigest reports whether one of img's manifests has digest d.
func imageHasDigest(img *storage.Image, d digest.Digest) bool {
	if img.Digest == d {
		return true
	}
	for _, have := range img.Digests {
		if have == d {
			return true
		}
	}
	return false
}

// shortID abbreviates an image ID to the 12 characters clients show.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
