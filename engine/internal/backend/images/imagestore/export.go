package imagestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/containers/image/v5/copy"
	"github.com/containers/image/v5/directory"
	dockerarchive "github.com/containers/image/v5/docker/archive"
	"github.com/containers/image/v5/docker/reference"
	"github.com/containers/image/v5/manifest"
	ociarchive "github.com/containers/image/v5/oci/archive"
	"github.com/containers/image/v5/oci/layout"
	istorage "github.com/containers/image/v5/storage"
	"github.com/containers/image/v5/types"
	"github.com/containers/storage/pkg/archive"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-project/berth/engine/internal/core"
)

// exportSource is one image to export and the name to record for it.
type exportSource struct {
	id   string
	ref  types.ImageReference
	name reference.NamedTagged // nil when the image was named by ID or has no tag
}

// Export writes the named images in opts.Format to a temporary file (or, for
// directory formats, a tar of a temporary directory) and returns it for
// streaming; nothing is sent before the export is complete, so a failure
// still gets a proper error status.
func (t *Transfer) Export(ctx context.Context, names []string, opts core.ExportOptions) (_ io.ReadCloser, err error) {
	defer t.observe("export", time.Now(), &err)
	format := opts.Format
	if format == "" {
		format = core.FormatDockerArchive
	}
	switch format {
	case core.FormatDockerArchive, core.FormatOCIArchive, core.FormatOCIDir, core.FormatDockerDir:
	default:
		return nil, core.InvalidArgument("format", fmt.Errorf("%q is not docker-archive, oci-archive, oci-dir or docker-dir", format))
	}
	if len(names) == 0 {
		return nil, core.InvalidArgument("references", errors.New("no image to export"))
	}
	if len(names) > 1 && format != core.FormatDockerArchive {
		return nil, core.InvalidArgument("format", fmt.Errorf("several images can only be exported as %s, not %s", core.FormatDockerArchive, format))
	}
	sources := make([]exportSource, 0, len(names))
	for _, name := range names {
		src, err := t.exportSource(ctx, name)
		if err != nil {
			return nil, err
		}
		sources = append(sources, src)
	}

	defer func() {
		if err == nil {
			for i, src := range sources {
				name := names[i]
				if src.name != nil {
					name = src.name.String()
				}
				t.store.emit(ctx, "save", src.id, name)
			}
		}
	}()
	sys := t.systemContext()
	sys.OCIAcceptUncompressedLayers = opts.OCIAcceptUncompressedLayers
	switch format {
	case core.FormatDockerArchive:
		return t.exportDockerArchive(ctx, sys, sources)
	case core.FormatOCIArchive:
		return t.exportFile(ctx, "export-*.tar", func(path string) error {
			tag := ""
			if sources[0].name != nil {
				tag = sources[0].name.String()
			}
			dest, err := ociarchive.NewReference(path, tag)
			if err != nil {
				return err
			}
			return t.exportCopy(ctx, sys, dest, sources[0].ref, "")
		})
	default:
		return t.exportDir(ctx, sys, format, opts.Compress, sources[0])
	}
}

// exportSource resolves name to a storage reference and the tag to record:
// the image's tag the name stands for, none when name is an ID.
func (t *Transfer) exportSource(ctx context.Context, name string) (exportSource, error) {
	img, err := t.store.lookupToSave(name)
	if err != nil {
		return exportSource{}, err
	}
	ref, err := istorage.Transport.NewStoreReference(t.store.Storage(), nil, img.ID)
	if err != nil {
		return exportSource{}, err
	}
	return exportSource{id: img.ID, ref: ref, name: matchingTag(name, img)}, nil
}

// matchingTag returns which of the image's tags name refers to, or nil when
// name is an ID (prefix) or matches none.
func matchingTag(name string, img *core.Image) reference.NamedTagged {
	trimmed := strings.TrimPrefix(name, "sha256:")
	if hexID.MatchString(trimmed) && strings.HasPrefix(img.ID, trimmed) {
		return nil
	}
	var wanted []string
	if n, err := localName(name); err == nil {
		wanted = append(wanted, n.String())
	}
	if n, err := reference.ParseNormalizedNamed(name); err == nil {
		wanted = append(wanted, reference.TagNameOnly(n).String())
	}
	for _, w := range wanted {
		for _, tag := range img.RepoTags {
			if tag == w {
				return parseTagged(tag)
			}
		}
	}
	// A short name found through a search registry: the tag whose path ends in it.
	if ref, err := ParseReference(name); err == nil && ref.Short {
		suffix := "/" + ref.Path
		wantTag := "latest"
		if tagged, ok := ref.Named.(reference.Tagged); ok {
			wantTag = tagged.Tag()
		}
		for _, tag := range img.RepoTags {
			if named := parseTagged(tag); named != nil && strings.HasSuffix(named.Name(), suffix) && named.Tag() == wantTag {
				return named
			}
		}
	}
	return nil
}

func parseTagged(s string) reference.NamedTagged {
	named, err := reference.ParseNormalizedNamed(s)
	if err != nil {
		return nil
	}
	tagged, _ := named.(reference.NamedTagged)
	return tagged
}

// exportDockerArchive writes all sources into one docker-archive. An image
// named several times is written once, with all those tags.
func (t *Transfer) exportDockerArchive(ctx context.Context, sys *types.SystemContext, sources []exportSource) (io.ReadCloser, error) {
	type entry struct {
		ref  types.ImageReference
		tags []reference.NamedTagged
	}
	var order []string
	byID := map[string]*entry{}
	for _, src := range sources {
		id := src.ref.StringWithinTransport()
		e, ok := byID[id]
		if !ok {
			e = &entry{ref: src.ref}
			byID[id] = e
			order = append(order, id)
		}
		if src.name != nil && !slices.ContainsFunc(e.tags, func(n reference.NamedTagged) bool { return n.String() == src.name.String() }) {
			e.tags = append(e.tags, src.name)
		}
	}
	return t.exportFile(ctx, "export-*.tar", func(path string) error {
		writer, err := dockerarchive.NewWriter(sys, path)
		if err != nil {
			return err
		}
		for _, id := range order {
			e := byID[id]
			var first reference.NamedTagged
			imageCtx := *sys
			if len(e.tags) > 0 {
				first = e.tags[0]
				imageCtx.DockerArchiveAdditionalTags = e.tags[1:]
			}
			dest, err := writer.NewReference(first)
			if err != nil {
				writer.Close()
				return err
			}
			if err := t.exportCopy(ctx, &imageCtx, dest, e.ref, manifest.DockerV2Schema2MediaType); err != nil {
				writer.Close()
				return err
			}
		}
		return writer.Close()
	})
}

// exportDir writes an oci-dir or docker-dir into a temporary directory and
// returns a tar stream of it that removes the directory when closed.
func (t *Transfer) exportDir(ctx context.Context, sys *types.SystemContext, format string, compress bool, src exportSource) (io.ReadCloser, error) {
	dir, err := t.tempDir("export-dir-*")
	if err != nil {
		return nil, fmt.Errorf("exporting: %w", err)
	}
	var dest types.ImageReference
	mimeType := ""
	if format == core.FormatOCIDir {
		tag := ""
		if src.name != nil {
			tag = src.name.String()
		}
		dest, err = layout.NewReference(dir, tag)
		mimeType = imgspecv1.MediaTypeImageManifest
	} else {
		sys.DirForceCompress = compress
		dest, err = directory.NewReference(dir)
		mimeType = manifest.DockerV2Schema2MediaType
	}
	if err == nil {
		err = t.exportCopy(ctx, sys, dest, src.ref, mimeType)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	stream, err := archive.Tar(dir, archive.Uncompressed)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("exporting: %w", err)
	}
	return &cleanupReadCloser{ReadCloser: stream, cleanup: func() { os.RemoveAll(dir) }}, nil
}

// exportFile runs write with a fresh temporary path and returns the finished
// file opened for reading; closing it removes the file.
func (t *Transfer) exportFile(ctx context.Context, pattern string, write func(path string) error) (io.ReadCloser, error) {
	f, err := t.tempFile(pattern)
	if err != nil {
		return nil, fmt.Errorf("exporting: %w", err)
	}
	path := f.Name()
	f.Close()
	// The archive writers refuse to overwrite a non-empty file but accept an
	// empty one; removing it first keeps both paths working.
	os.Remove(path)
	if err := write(path); err != nil {
		os.Remove(path)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("exporting: %w", err)
	}
	out, err := os.Open(path)
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("exporting: %w", err)
	}
	return &cleanupReadCloser{ReadCloser: out, cleanup: func() { os.Remove(path) }}, nil
}

// exportCopy copies one stored image to an export destination.
func (t *Transfer) exportCopy(ctx context.Context, sys *types.SystemContext, dest, src types.ImageReference, mimeType string) error {
	_, err := t.copyImage(ctx, dest, src, &copy.Options{
		SourceCtx:             sys,
		DestinationCtx:        sys,
		ForceManifestMIMEType: mimeType,
	})
	return err
}

// cleanupReadCloser runs cleanup once after closing the stream.
type cleanupReadCloser struct {
	io.ReadCloser
	cleanup func()
	closed  bool
}

func (c *cleanupReadCloser) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	err := c.ReadCloser.Close()
	c.cleanup()
	return err
}
