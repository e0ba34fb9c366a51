package imagestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containers/image/v5/copy"
	dockerarchive "github.com/containers/image/v5/docker/archive"
	"github.com/containers/image/v5/docker/reference"
	"github.com/containers/image/v5/image"
	"github.com/containers/image/v5/oci/layout"
	"github.com/containers/image/v5/pkg/compression"
	istorage "github.com/containers/image/v5/storage"
	"github.com/containers/image/v5/types"
	"github.com/containers/storage"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-project/berth/engine/internal/backend/images/imagestore/archivefmt"
	"github.com/berth-project/berth/engine/internal/backend/platform/sizelimit"
	"github.com/berth-project/berth/engine/internal/core"
)

// Load stores every image of a docker-archive or oci-archive read from r.
func (t *Transfer) Load(ctx context.Context, r io.Reader, opts core.LoadOptions) (_ []string, err error) {
	defer t.observe("load", time.Now(), &err)
	path, err := t.receiveBody(ctx, r, "load-*.tar", "archive")
	if err != nil {
		return nil, err
	}
	defer os.Remove(path)
	return t.loadFile(ctx, path, opts)
}

// LoadFile stores every image of an archive on the engine host.
func (t *Transfer) LoadFile(ctx context.Context, path string) (_ []string, err error) {
	defer t.observe("load", time.Now(), &err)
	if path == "" {
		return nil, core.InvalidArgument("path", errors.New("must not be empty"))
	}
	if !filepath.IsAbs(path) {
		return nil, core.InvalidArgument("path", fmt.Errorf("%q is not an absolute path", path))
	}
	info, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			// Podman's ImagesLocalLoad answers 404 with these words.
			return nil, fmt.Errorf("file does not exist: %q: %w", path, core.ErrNoSuchPath)
		}
		return nil, core.InvalidArgument("path", err)
	}
	if !info.Mode().IsRegular() {
		return nil, core.InvalidArgument("path", fmt.Errorf("%s is not a regular file (only image archives can be loaded)", path))
	}
	return t.loadFile(ctx, path, core.LoadOptions{})
}

// loadFile loads the archive at path: the format is read from its entries,
// never guessed by trying transports one after another. What the archive
// expands to is bounded before anything unpacks it: its decompressed form,
// then the sum of its entries (layers decompressed). All images are stored
// or, on any failure, none: images this load created are removed and names
// it moved are given back.
func (t *Transfer) loadFile(ctx context.Context, path string, opts core.LoadOptions) (names []string, err error) {
	path, cleanup, err := t.decompressed(ctx, path)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	format, err := archivefmt.Sniff(path)
	if err != nil {
		return nil, err
	}
	if err := t.measureArchive(ctx, path); err != nil {
		return nil, err
	}

	end := t.begin()
	session, err := t.newLoadSession()
	if err != nil {
		end(false)
		return nil, err
	}
	defer func() {
		if err != nil {
			if rerr := t.rollback(session); rerr != nil {
				t.logger.Warn("rolling back a failed load", "error", rerr)
			}
		}
		end(err != nil)
	}()

	switch format {
	case archivefmt.Docker:
		names, err = t.loadDockerArchive(ctx, session, path, opts)
	default:
		names, err = t.loadOCIArchive(ctx, session, path)
	}
	if err != nil {
		return nil, classifyLoadError(ctx, err)
	}
	for _, name := range names {
		id := name
		if img, err := t.store.Lookup(ctx, name); err == nil {
			id = img.ID
		}
		t.store.emit(ctx, "loadfromarchive", id, name)
	}
	return names, nil
}

// measureArchive charges the uncompressed archive at path with what its
// entries expand to (layer blobs decompressed), so a layer bomb is refused
// before containers/image applies it.
func (t *Transfer) measureArchive(ctx context.Context, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("opening archive: %w", err)
	}
	defer f.Close()
	return t.budget("image layers").MeasureTar(ctx, f)
}

// classifyLoadError makes a failure caused by the archive's content a 400;
// cancellations, archives over the size bound and faults of the engine's own
// disk stay what they are.
func classifyLoadError(ctx context.Context, err error) error {
	if ctx.Err() != nil || isStorageFault(err) || errors.Is(err, core.ErrInvalidArgument) || errors.Is(err, core.ErrTooLarge) {
		return err
	}
	return core.InvalidArgument("archive", err)
}

// decompressed returns a path to the uncompressed archive: path itself, or
// a temporary file when the archive is gzip, bzip2, xz or zstd compressed.
// The decompressed copy is bounded (see sizelimit) and stops when ctx ends.
func (t *Transfer) decompressed(ctx context.Context, path string) (string, func(), error) {
	noop := func() {}
	f, err := os.Open(path)
	if err != nil {
		return "", noop, fmt.Errorf("opening archive: %w", err)
	}
	defer f.Close()
	src := sizelimit.Count(f)
	algo, decompressor, stream, err := compression.DetectCompressionFormat(src)
	if err != nil {
		return "", noop, core.InvalidArgument("archive", fmt.Errorf("detecting compression: %w", err))
	}
	if decompressor == nil {
		return path, noop, nil
	}
	rc, err := decompressor(stream)
	if err != nil {
		return "", noop, core.InvalidArgument("archive", fmt.Errorf("%s stream: %w", algo.Name(), err))
	}
	defer rc.Close()
	// A bomb is refused by its expansion within the first few hundred
	// megabytes, not after spooling the whole size bound.
	out, err := t.spool(ctx, sizelimit.LimitRatio(rc, src, "archive"), "load-decompressed-*.tar", "archive", "decompressing "+algo.Name()+" archive")
	if err != nil {
		return "", noop, err
	}
	return out, func() { _ = os.Remove(out) }, nil
}

// loadDockerArchive copies each image of a docker-archive once, then adds
// its further tags.
func (t *Transfer) loadDockerArchive(ctx context.Context, session *loadSession, path string, opts core.LoadOptions) ([]string, error) {
	name := localName
	if opts.DockerHubShortNames {
		name = dockerHubName
	}
	sys := t.systemContext()
	reader, err := dockerarchive.NewReader(sys, path)
	if err != nil {
		return nil, core.InvalidArgument("archive", err)
	}
	defer reader.Close()
	lists, err := reader.List()
	if err != nil {
		return nil, core.InvalidArgument("archive", err)
	}
	if len(lists) == 0 {
		return nil, core.InvalidArgument("archive", errors.New("manifest.json lists no image"))
	}
	var names []string
	for _, refs := range lists {
		if len(refs) == 0 {
			continue
		}
		// The tags as written in manifest.json: a short name goes under
		// localhost/, as Podman loads it, not under docker.io.
		var tags []reference.Named
		seen := map[string]bool{}
		for _, ref := range refs {
			if ref.DockerReference() == nil {
				continue
			}
			raw, err := reader.ManifestTagsForReference(ref)
			if err != nil {
				return nil, core.InvalidArgument("archive", err)
			}
			for _, tag := range raw {
				n, err := name(tag)
				if err != nil {
					return nil, core.InvalidArgument("archive", fmt.Errorf("image name %q: %w", tag, err))
				}
				if !seen[n.String()] {
					seen[n.String()] = true
					tags = append(tags, n)
				}
			}
		}
		loaded, err := t.storeImage(ctx, session, refs[0], tags)
		if err != nil {
			return nil, err
		}
		names = append(names, loaded...)
	}
	return names, nil
}

// loadOCIArchive unpacks an oci-archive once and copies every manifest of
// its index; the org.opencontainers.image.ref.name annotation names it.
func (t *Transfer) loadOCIArchive(ctx context.Context, session *loadSession, path string) ([]string, error) {
	dir, err := t.tempDir("load-oci-*")
	if err != nil {
		return nil, fmt.Errorf("unpacking archive: %w", err)
	}
	defer os.RemoveAll(dir)
	if err := archivefmt.UnpackLayout(ctx, path, dir); err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		return nil, core.InvalidArgument("archive", fmt.Errorf("reading index.json: %w", err))
	}
	var index imgspecv1.Index
	if err := json.Unmarshal(raw, &index); err != nil {
		return nil, core.InvalidArgument("archive", fmt.Errorf("index.json: %w", err))
	}
	if len(index.Manifests) == 0 {
		return nil, core.InvalidArgument("archive", errors.New("index.json lists no image"))
	}
	var names []string
	for i, desc := range index.Manifests {
		src, err := layout.NewIndexReference(dir, i)
		if err != nil {
			return nil, core.InvalidArgument("archive", err)
		}
		var tags []reference.Named
		if name := ociRefName(desc.Annotations); name != "" {
			n, err := localName(name)
			if err != nil {
				return nil, core.InvalidArgument("archive", fmt.Errorf("image name %q in index.json: %w", name, err))
			}
			tags = append(tags, n)
		}
		loaded, err := t.storeImage(ctx, session, src, tags)
		if err != nil {
			return nil, err
		}
		names = append(names, loaded...)
	}
	return names, nil
}

// ociRefName is the image name an OCI index entry carries, as Podman and
// containerd write it.
func ociRefName(annotations map[string]string) string {
	if name := annotations["io.containerd.image.name"]; name != "" {
		return name
	}
	return annotations[imgspecv1.AnnotationRefName]
}

// storeImage copies src into the store under the first of names (or its ID
// when it has none), then adds the other names. It returns the names, or
// "sha256:<id>" for an untagged image, as Podman reports loads.
func (t *Transfer) storeImage(ctx context.Context, session *loadSession, src types.ImageReference, names []reference.Named) ([]string, error) {
	st := t.store.Storage()
	var dest types.ImageReference
	var err error
	if len(names) > 0 {
		dest, err = istorage.Transport.NewStoreReference(st, names[0], "")
	} else {
		var id string
		id, err = configID(ctx, t.systemContext(), src)
		if err != nil {
			return nil, core.InvalidArgument("archive", err)
		}
		dest, err = istorage.Transport.NewStoreReference(st, nil, id)
	}
	if err != nil {
		return nil, core.InvalidArgument("archive", err)
	}
	var resolved types.ImageReference
	if _, err := t.copyImage(ctx, dest, src, &copy.Options{ReportResolvedReference: &resolved}); err != nil {
		return nil, err
	}
	id, err := storedImageID(resolved, dest)
	if err != nil {
		return nil, err
	}
	session.stored = append(session.stored, id)
	if len(names) == 0 {
		return []string{"sha256:" + id}, nil
	}
	out := make([]string, 0, len(names))
	extra := make([]string, 0, len(names)-1)
	for i, n := range names {
		out = append(out, n.String())
		if i > 0 {
			extra = append(extra, n.String())
		}
	}
	if len(extra) > 0 {
		if err := st.AddNames(id, extra); err != nil {
			return nil, fmt.Errorf("naming image %s: %w", id, err)
		}
	}
	return out, nil
}

// configID is the image ID a copy of src gets: its config digest.
func configID(ctx context.Context, sys *types.SystemContext, src types.ImageReference) (string, error) {
	source, err := src.NewImageSource(ctx, sys)
	if err != nil {
		return "", err
	}
	defer source.Close()
	img, err := image.FromUnparsedImage(ctx, sys, image.UnparsedInstance(source, nil))
	if err != nil {
		return "", err
	}
	info := img.ConfigInfo()
	if info.Digest == "" {
		return "", errors.New("image has no config")
	}
	if err := info.Digest.Validate(); err != nil {
		return "", err
	}
	return info.Digest.Encoded(), nil
}

// dockerHubName normalizes an image name the way dockerd names loaded
// images: a name without a registry is on Docker Hub ("alpine:3" is
// docker.io/library/alpine:3), a missing tag is latest.
func dockerHubName(name string) (reference.Named, error) {
	named, err := reference.ParseNormalizedNamed(name)
	if err != nil {
		return nil, err
	}
	return localName(named.String())
}

// localName normalizes an image name the way Podman names loaded images: a
// name without a registry goes under localhost/, a missing tag is latest,
// and a tagged-and-digested name keeps its tag.
func localName(name string) (reference.Named, error) {
	parsed, err := reference.Parse(name)
	if err != nil {
		return nil, err
	}
	named, ok := parsed.(reference.Named)
	if !ok {
		return nil, fmt.Errorf("%q is not a named reference", name)
	}
	if domain := reference.Domain(named); !strings.ContainsAny(domain, ".:") && domain != "localhost" {
		name = "localhost/" + parsed.String()
	}
	normalized, err := reference.ParseNormalizedNamed(name)
	if err != nil {
		return nil, err
	}
	if tagged, ok := normalized.(reference.NamedTagged); ok {
		if _, digested := normalized.(reference.Digested); digested {
			return reference.WithTag(reference.TrimNamed(normalized), tagged.Tag())
		}
		return normalized, nil
	}
	if _, digested := normalized.(reference.Digested); digested {
		return normalized, nil
	}
	return reference.TagNameOnly(normalized), nil
}

// loadSession records the store's names and images before a load and the
// images the load stored, so that a failed load can be undone without
// touching what concurrent operations do.
type loadSession struct {
	existed map[string]bool
	owner   map[string]string
	stored  []string
}

func (t *Transfer) newLoadSession() (*loadSession, error) {
	images, err := t.store.Storage().Images()
	if err != nil {
		return nil, fmt.Errorf("listing images: %w", err)
	}
	session := &loadSession{existed: make(map[string]bool, len(images)), owner: map[string]string{}}
	for _, img := range images {
		session.existed[img.ID] = true
		for _, n := range img.Names {
			session.owner[n] = img.ID
		}
	}
	return session, nil
}

// rollback removes the images the load created and gives the names it took
// from other images back to them.
func (t *Transfer) rollback(session *loadSession) error {
	st := t.store.Storage()
	var errs []error
	touched := map[string]bool{}
	for _, id := range session.stored {
		touched[id] = true
		if session.existed[id] {
			continue
		}
		if _, err := st.DeleteImage(id, true); err != nil && !errors.Is(err, storage.ErrImageUnknown) {
			errs = append(errs, fmt.Errorf("removing image %s: %w", id, err))
		}
	}
	// Names this load added to images that existed before come off again.
	for _, id := range session.stored {
		if !session.existed[id] {
			continue
		}
		img, err := st.Image(id)
		if err != nil {
			continue
		}
		var added []string
		for _, n := range img.Names {
			if session.owner[n] != id {
				added = append(added, n)
			}
		}
		if len(added) > 0 {
			if err := st.RemoveNames(id, added); err != nil {
				errs = append(errs, fmt.Errorf("removing names of image %s: %w", id, err))
			}
		}
	}
	restore := map[string][]string{}
	for _, id := range session.stored {
		img, err := st.Image(id)
		if err != nil {
			continue
		}
		for _, n := range img.Names {
			if prev, ok := session.owner[n]; ok && prev != id {
				restore[prev] = append(restore[prev], n)
			}
		}
	}
	for name, prev := range session.owner {
		if touched[prev] {
			continue
		}
		if _, err := st.Image(name); errors.Is(err, storage.ErrImageUnknown) {
			restore[prev] = append(restore[prev], name)
		}
	}
	for id, names := range restore {
		if err := st.AddNames(id, names); err != nil && !errors.Is(err, storage.ErrImageUnknown) {
			errs = append(errs, fmt.Errorf("restoring names of image %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}
