package imagestore

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/containers/image/v5/manifest"
	"github.com/containers/storage"
	"github.com/containers/storage/pkg/archive"
	"github.com/opencontainers/go-digest"
	imgspecs "github.com/opencontainers/image-spec/specs-go"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-project/berth/engine/internal/backend/platform/ioctx"
	"github.com/berth-project/berth/engine/internal/core"
)

// Image formats a commit can write.
const (
	// FormatOCI writes an OCI manifest and configuration.
	FormatOCI = "oci"
	// FormatDocker writes a Docker schema 2 manifest and configuration, which
	// also keep ONBUILD, HEALTHCHECK and SHELL.
	FormatDocker = "docker"
)

// RuntimeConfig is the runtime part of an image configuration: OCI's fields
// plus the ones only the Docker format keeps.
type RuntimeConfig struct {
	imgspecv1.ImageConfig
	// OnBuild are the ONBUILD instructions (Docker format only).
	OnBuild []string
	// Healthcheck is the image's health check (Docker format only).
	Healthcheck *manifest.Schema2HealthConfig
	// Shell is the shell of shell-form instructions (Docker format only).
	Shell []string
}

// CommitOptions describe a new image: a parent image, at most one new layer
// on top of the parent's layers, and its configuration. Builds and container
// commits both make images this way.
type CommitOptions struct {
	// Parent is the ID (or a name) of the image the new one builds on; ""
	// starts from scratch. The new image inherits the parent's configuration,
	// platform and history.
	Parent string
	// Layer is the new layer's content as an uncompressed tar of changes
	// relative to the parent's top layer (deletions as ".wh." whiteout
	// entries, as containers/storage's Diff writes them). Nil adds no layer:
	// the history entry is then marked empty_layer.
	Layer io.Reader
	// Squash makes the image's only layer the parent's layers and Layer
	// merged; the history then holds the new entry alone.
	Squash bool
	// Edit, when set, changes the configuration inherited from the parent
	// before Changes are applied.
	Edit func(*RuntimeConfig) error
	// Changes are Dockerfile-style instructions (CMD, ENTRYPOINT, ENV,
	// EXPOSE, LABEL, ONBUILD (docker format only), STOPSIGNAL, USER, VOLUME,
	// WORKDIR); a bad one is an ErrInvalidArgument about "changes".
	Changes []string
	// Author, Comment and CreatedBy go into the new history entry (Author and
	// Comment into the configuration too).
	Author, Comment, CreatedBy string
	// Format is FormatOCI (the default for "") or FormatDocker.
	Format string
	// Names are the references to give the image (short ones under
	// localhost/); a name another image holds moves to the new one.
	Names []string
	// Created is the creation time recorded; zero means now.
	Created time.Time
	// Annotations go into the OCI manifest (the docker format has none: an
	// ErrInvalidArgument about "annotations").
	Annotations map[string]string
	// Metadata is stored with the image in containers/storage (builds keep
	// their layer cache key there).
	Metadata string
}

// Commit stores a new image made as opts describe and returns its ID (the
// digest of its configuration, without "sha256:"). Either the image is
// complete, or nothing of it remains: a failure removes the layer it added,
// and a crash leaves at most an unreferenced layer, which the next start
// removes (see NewTransfer).
func (t *Transfer) Commit(ctx context.Context, opts CommitOptions) (id string, err error) {
	defer t.observe("commit", time.Now(), &err)
	format := opts.Format
	if format == "" {
		format = FormatOCI
	}
	if format != FormatOCI && format != FormatDocker {
		return "", core.InvalidArgument("format", fmt.Errorf("%q is not oci or docker", opts.Format))
	}
	if format == FormatDocker && len(opts.Annotations) > 0 {
		return "", core.InvalidArgument("annotations", errors.New("the docker format has no annotations"))
	}
	names := make([]string, 0, len(opts.Names))
	for _, n := range opts.Names {
		named, err := localName(n)
		if err != nil {
			return "", core.InvalidArgument("reference", fmt.Errorf("%q: %w", n, err))
		}
		names = append(names, named.String())
	}
	created := opts.Created.UTC()
	if opts.Created.IsZero() {
		created = time.Now().UTC()
	}
	st := t.store.Storage()

	base := committedImage{Platform: imgspecv1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}}
	var parentTop string
	if opts.Parent != "" {
		parent, err := t.store.lookupStorageImage(opts.Parent)
		if err != nil {
			return "", err
		}
		if base, err = t.store.readCommitted(parent); err != nil {
			return "", err
		}
		parentTop = parent.TopLayer
	}
	cfg := base.Config
	if opts.Edit != nil {
		if err := opts.Edit(&cfg); err != nil {
			return "", err
		}
	}
	if err := cfg.apply(opts.Changes, format == FormatDocker); err != nil {
		return "", err
	}

	end := t.begin()
	var added []string
	defer func() {
		if err != nil {
			for i := len(added) - 1; i >= 0; i-- {
				if derr := st.DeleteLayer(added[i]); derr != nil && !errors.Is(derr, storage.ErrLayerUnknown) {
					t.logger.Warn("removing the layer of a failed commit", "layer", added[i], "error", derr)
				}
			}
		}
		end(err != nil)
	}()
	top := parentTop
	if opts.Layer != nil {
		layer, created, err := t.putChainLayer(ctx, st, parentTop, opts.Layer, true)
		if created {
			added = append(added, layer)
		}
		if err != nil {
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			return "", core.InvalidArgument("layer", fmt.Errorf("storing the new layer: %w", err))
		}
		top = layer
	}
	history := append([]imgspecv1.History(nil), base.History...)
	if opts.Squash {
		squashed, err := t.squash(ctx, top)
		if err != nil {
			return "", err
		}
		if squashed.created {
			added = append(added, squashed.id)
		}
		if opts.Layer != nil && len(added) > 0 && added[0] != squashed.id {
			// The unsquashed layer was only the way to the merged view.
			if err := st.DeleteLayer(added[0]); err != nil {
				return "", fmt.Errorf("squashing: %w", err)
			}
			added = added[1:]
		}
		top = squashed.id
		history = nil
	}
	history = append(history, imgspecv1.History{
		Created:    &created,
		CreatedBy:  opts.CreatedBy,
		Author:     opts.Author,
		Comment:    opts.Comment,
		EmptyLayer: opts.Layer == nil && !opts.Squash,
	})
	layers, err := layerDescriptors(st, top)
	if err != nil {
		return "", err
	}
	img := committedImage{
		Created:  created,
		Author:   opts.Author,
		Comment:  opts.Comment,
		Platform: base.Platform,
		Config:   cfg,
		History:  history,
	}
	configBlob, manifestBlob, err := img.encode(format, layers, opts.Annotations)
	if err != nil {
		return "", err
	}
	configDigest := digest.Canonical.FromBytes(configBlob)
	manifestDigest := digest.Canonical.FromBytes(manifestBlob)
	id = configDigest.Encoded()
	manifestKey := storage.ImageDigestManifestBigDataNamePrefix + "-" + manifestDigest.String()
	_, err = st.CreateImage(id, nil, top, opts.Metadata, &storage.ImageOptions{
		CreationDate: created,
		Digest:       manifestDigest,
		BigData: []storage.ImageBigDataOption{
			{Key: configDigest.String(), Data: configBlob, Digest: configDigest},
			{Key: manifestKey, Data: manifestBlob, Digest: manifestDigest},
			{Key: storage.ImageDigestBigDataKey, Data: manifestBlob, Digest: manifestDigest},
		},
	})
	if err != nil {
		return "", fmt.Errorf("creating image: %w", err)
	}
	if len(names) > 0 {
		if err := st.AddNames(id, names); err != nil {
			if _, derr := st.DeleteImage(id, true); derr != nil {
				t.logger.Warn("removing the image of a failed commit", "image", id, "error", derr)
			}
			return "", fmt.Errorf("naming committed image: %w", err)
		}
	}
	return id, nil
}

// lookupStorageImage finds an image by ID or name.
func (s *Store) lookupStorageImage(nameOrID string) (*storage.Image, error) {
	if img, err := s.store.Image(nameOrID); err == nil {
		return img, nil
	}
	found, err := s.Lookup(context.Background(), nameOrID)
	if err != nil {
		return nil, err
	}
	return s.store.Image(found.ID)
}

// squashedLayer is the layer a squash stored (or found already stored).
type squashedLayer struct {
	id      string
	created bool
}

// squash stores the merged content of layer top and every layer below it as
// one parentless layer and returns its ID.
func (t *Transfer) squash(ctx context.Context, top string) (squashedLayer, error) {
	st := t.store.Storage()
	if top == "" {
		id, created, err := t.putChainLayer(ctx, st, "", emptyTar(), false)
		if err != nil {
			return squashedLayer{}, fmt.Errorf("squashing: %w", err)
		}
		return squashedLayer{id, created}, nil
	}
	// A writable layer over top gives a mountable view of the whole chain.
	scratch, err := st.CreateLayer("", top, nil, "", true, nil)
	if err != nil {
		return squashedLayer{}, fmt.Errorf("squashing: %w", err)
	}
	defer func() {
		if err := st.DeleteLayer(scratch.ID); err != nil {
			t.logger.Warn("removing the scratch layer of a squash", "layer", scratch.ID, "error", err)
		}
	}()
	dir, err := st.Mount(scratch.ID, "")
	if err != nil {
		return squashedLayer{}, fmt.Errorf("squashing: %w", err)
	}
	defer func() { _, _ = st.Unmount(scratch.ID, true) }()
	tr, err := archive.Tar(dir, archive.Uncompressed)
	if err != nil {
		return squashedLayer{}, fmt.Errorf("squashing: %w", err)
	}
	defer tr.Close()
	id, created, err := t.putChainLayer(ctx, st, "", tr, false)
	if err != nil {
		if ctx.Err() != nil {
			return squashedLayer{}, ctx.Err()
		}
		return squashedLayer{}, fmt.Errorf("squashing: %w", err)
	}
	return squashedLayer{id, created}, nil
}

// putChainLayer stores the uncompressed layer diff over parent under the
// ID containers/image gives the same layer when it pulls or loads it: the
// diff's digest for a base layer, else the digest of "PARENT+DIFFID". An
// image the engine committed or built, once pushed or saved, is then found
// again, layer for layer, by a pull or a load of it, rather than refused
// as an image whose ID exists with another top layer. The diff is read once
// to learn its digest (and, with checkTar, to check it is a whole tar
// archive), then again from the start: a diff that cannot seek is spooled
// to the engine's tmp directory. A layer that exists already is reused
// (created false).
func (t *Transfer) putChainLayer(ctx context.Context, st storage.Store, parent string, diff io.Reader, checkTar bool) (id string, created bool, err error) {
	src, seekable := diff.(io.ReadSeeker)
	var start int64
	digester := digest.Canonical.Digester()
	var sink io.Writer = digester.Hash()
	if seekable {
		if start, err = src.Seek(0, io.SeekCurrent); err != nil {
			return "", false, err
		}
	} else {
		spool, err := t.tempFile("layer-*.tar")
		if err != nil {
			return "", false, err
		}
		defer func() {
			spool.Close()
			os.Remove(spool.Name())
		}()
		src, sink = spool, io.MultiWriter(spool, sink)
	}
	r := ioctx.Reader(ctx, diff)
	var check *tarCheck
	if checkTar {
		check = newTarCheck(r)
		r = check
	}
	if _, err := io.Copy(sink, r); err != nil {
		return "", false, err
	}
	if check != nil {
		if err := check.finish(); err != nil {
			return "", false, err
		}
	}
	id = digester.Digest().Encoded()
	if parent != "" {
		id = digest.Canonical.FromString(parent + "+" + id).Encoded()
	}
	if _, err := st.Layer(id); err == nil {
		return id, false, nil
	}
	if _, err := src.Seek(start, io.SeekStart); err != nil {
		return "", false, err
	}
	// The digest is known: the store need not compute it again (the diff
	// is uncompressed, so it is both the original and the uncompressed one).
	diffID := digester.Digest()
	opts := &storage.LayerOptions{OriginalDigest: diffID, UncompressedDigest: diffID}
	layer, _, err := st.PutLayer(id, parent, nil, "", false, opts, ioctx.Reader(ctx, src))
	if err != nil {
		return "", false, err
	}
	return layer.ID, true, nil
}

// tarCheck passes a tar stream through while a tar reader checks it, so a
// truncated or malformed layer is refused even where the storage driver's
// extraction accepts it.
type tarCheck struct {
	r    io.Reader
	pw   *io.PipeWriter
	done chan error
	n    int64
}

func newTarCheck(r io.Reader) *tarCheck {
	pr, pw := io.Pipe()
	c := &tarCheck{pw: pw, done: make(chan error, 1)}
	c.r = io.TeeReader(r, pw)
	go func() {
		tr := tar.NewReader(pr)
		var err error
		for err == nil {
			_, err = tr.Next()
		}
		if errors.Is(err, io.EOF) {
			err = nil
		} else {
			err = fmt.Errorf("not a valid tar archive: %w", err)
		}
		// Keep draining so that the writer never blocks.
		_, _ = io.Copy(io.Discard, pr)
		c.done <- err
	}()
	return c
}

func (c *tarCheck) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// finish ends the stream and reports what the tar reader found; a stream
// that does not end on a tar block boundary was cut short.
func (c *tarCheck) finish() error {
	_ = c.pw.Close()
	if err := <-c.done; err != nil {
		return err
	}
	if c.n%512 != 0 {
		return errors.New("not a valid tar archive: truncated")
	}
	return nil
}

// emptyTar is a tar archive with no entries.
func emptyTar() io.Reader {
	return io.LimitReader(zeroReader{}, 1024)
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// committedImage is what a commit reads from a parent and writes anew.
type committedImage struct {
	Created  time.Time
	Author   string
	Comment  string
	Platform imgspecv1.Platform
	Config   RuntimeConfig
	History  []imgspecv1.History
}

// readCommitted reads the configuration of img in either format.
func (s *Store) readCommitted(img *storage.Image) (committedImage, error) {
	rawManifest, mimeType := s.readManifest(img)
	raw, err := s.configBlob(img, rawManifest, mimeType)
	if err != nil {
		return committedImage{}, err
	}
	var oci imgspecv1.Image
	if err := json.Unmarshal(raw, &oci); err != nil {
		return committedImage{}, fmt.Errorf("decoding configuration of image %s: %w", shortID(img.ID), err)
	}
	out := committedImage{Platform: oci.Platform, Config: RuntimeConfig{ImageConfig: oci.Config}, History: oci.History}
	var docker manifest.Schema2Image
	if json.Unmarshal(raw, &docker) == nil && docker.Config != nil {
		out.Config.OnBuild = docker.Config.OnBuild
		out.Config.Healthcheck = docker.Config.Healthcheck
		out.Config.Shell = docker.Config.Shell
	}
	return out, nil
}

// layerDescriptors describes the layers from the bottom of top's chain up
// to top, uncompressed, as a manifest lists them.
func layerDescriptors(st storage.Store, top string) ([]imgspecv1.Descriptor, error) {
	var chain []imgspecv1.Descriptor
	for id := top; id != ""; {
		layer, err := st.Layer(id)
		if err != nil {
			return nil, fmt.Errorf("reading layer %s: %w", id, err)
		}
		if layer.UncompressedDigest == "" || layer.UncompressedSize < 0 {
			return nil, fmt.Errorf("layer %s has no recorded digest", id)
		}
		chain = append(chain, imgspecv1.Descriptor{Digest: layer.UncompressedDigest, Size: layer.UncompressedSize})
		id = layer.Parent
	}
	for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
		chain[i], chain[j] = chain[j], chain[i]
	}
	return chain, nil
}

// encode renders the configuration and manifest in format.
func (img committedImage) encode(format string, layers []imgspecv1.Descriptor, annotations map[string]string) (configBlob, manifestBlob []byte, err error) {
	diffIDs := make([]digest.Digest, len(layers))
	for i, l := range layers {
		diffIDs[i] = l.Digest
	}
	if format == FormatDocker {
		return img.encodeDocker(layers, diffIDs)
	}
	created := img.Created
	configBlob, err = json.Marshal(imgspecv1.Image{
		Created:  &created,
		Author:   img.Author,
		Platform: img.Platform,
		Config:   img.Config.ImageConfig,
		RootFS:   imgspecv1.RootFS{Type: "layers", DiffIDs: diffIDs},
		History:  img.History,
	})
	if err != nil {
		return nil, nil, err
	}
	m := imgspecv1.Manifest{
		Versioned: imgspecs.Versioned{SchemaVersion: 2},
		MediaType: imgspecv1.MediaTypeImageManifest,
		Config: imgspecv1.Descriptor{
			MediaType: imgspecv1.MediaTypeImageConfig,
			Digest:    digest.Canonical.FromBytes(configBlob),
			Size:      int64(len(configBlob)),
		},
		Layers:      make([]imgspecv1.Descriptor, len(layers)),
		Annotations: annotations,
	}
	for i, l := range layers {
		m.Layers[i] = imgspecv1.Descriptor{MediaType: imgspecv1.MediaTypeImageLayer, Digest: l.Digest, Size: l.Size}
	}
	manifestBlob, err = json.Marshal(m)
	return configBlob, manifestBlob, err
}

func (img committedImage) encodeDocker(layers []imgspecv1.Descriptor, diffIDs []digest.Digest) ([]byte, []byte, error) {
	c := img.Config
	ports := manifest.Schema2PortSet{}
	for p := range c.ExposedPorts {
		ports[manifest.Schema2Port(p)] = struct{}{}
	}
	dockerConfig := &manifest.Schema2Config{
		User:         c.User,
		ExposedPorts: ports,
		Env:          c.Env,
		Cmd:          c.Cmd,
		Healthcheck:  c.Healthcheck,
		Volumes:      c.Volumes,
		WorkingDir:   c.WorkingDir,
		Entrypoint:   c.Entrypoint,
		OnBuild:      c.OnBuild,
		Labels:       c.Labels,
		StopSignal:   c.StopSignal,
		Shell:        c.Shell,
	}
	history := make([]manifest.Schema2History, len(img.History))
	for i, h := range img.History {
		var when time.Time
		if h.Created != nil {
			when = *h.Created
		}
		history[i] = manifest.Schema2History{Created: when, Author: h.Author, CreatedBy: h.CreatedBy, Comment: h.Comment, EmptyLayer: h.EmptyLayer}
	}
	configBlob, err := json.Marshal(manifest.Schema2Image{
		Schema2V1Image: manifest.Schema2V1Image{
			Created:         img.Created,
			Author:          img.Author,
			Comment:         img.Comment,
			Config:          dockerConfig,
			ContainerConfig: *dockerConfig,
			Architecture:    img.Platform.Architecture,
			Variant:         img.Platform.Variant,
			OS:              img.Platform.OS,
		},
		RootFS:  &manifest.Schema2RootFS{Type: "layers", DiffIDs: diffIDs},
		History: history,
	})
	if err != nil {
		return nil, nil, err
	}
	m := manifest.Schema2{
		SchemaVersion: 2,
		MediaType:     manifest.DockerV2Schema2MediaType,
		ConfigDescriptor: manifest.Schema2Descriptor{
			MediaType: manifest.DockerV2Schema2ConfigMediaType,
			Digest:    digest.Canonical.FromBytes(configBlob),
			Size:      int64(len(configBlob)),
		},
		LayersDescriptors: make([]manifest.Schema2Descriptor, len(layers)),
	}
	for i, l := range layers {
		m.LayersDescriptors[i] = manifest.Schema2Descriptor{MediaType: manifest.DockerV2SchemaLayerMediaTypeUncompressed, Digest: l.Digest, Size: l.Size}
	}
	manifestBlob, err := json.Marshal(m)
	return configBlob, manifestBlob, err
}
