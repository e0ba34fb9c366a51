package imagestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/containers/image/v5/copy"
	"github.com/containers/image/v5/docker"
	"github.com/containers/image/v5/docker/reference"
	"github.com/containers/image/v5/image"
	"github.com/containers/image/v5/manifest"
	"github.com/containers/image/v5/pkg/shortnames"
	istorage "github.com/containers/image/v5/storage"
	"github.com/containers/image/v5/types"
	"github.com/containers/storage"
	"github.com/opencontainers/go-digest"

	"github.com/berth-project/berth/engine/internal/core"
)

// ManifestLists implements core.ManifestLists on the image store: a list is
// a storage image without layers whose manifest is the list.
type ManifestLists struct {
	t *Transfer
}

// NewManifestLists returns the manifest list backend of a transfer backend
// (lists read instances from registries and push through it).
func NewManifestLists(t *Transfer) *ManifestLists { return &ManifestLists{t: t} }

var _ core.ManifestLists = (*ManifestLists)(nil)

// findList resolves name to a list image. A name that matches no image, or
// an image that is not a list, is ErrNoSuchManifestList.
func (m *ManifestLists) findList(name string) (*storage.Image, error) {
	img, err := m.t.store.find(name)
	if errors.Is(err, core.ErrNoSuchImage) {
		return nil, core.NoSuchManifestList(name)
	}
	if err != nil {
		return nil, err
	}
	if !isManifestList(m.t.store.store, img) {
		return nil, fmt.Errorf("%s is an image, not a manifest list: %w", name, core.ErrNoSuchManifestList)
	}
	return img, nil
}

// Create implements core.ManifestLists.
func (m *ManifestLists) Create(ctx context.Context, name string, images []string, opts core.ManifestCreateOptions) (string, error) {
	stored, err := listName(name)
	if err != nil {
		return "", err
	}
	s := m.t.store
	s.mu.Lock()
	id, created, err := m.createLocked(stored, opts)
	s.mu.Unlock()
	s.Changed()
	if err != nil || len(images) == 0 {
		return id, err
	}
	if _, err := m.Add(ctx, id, images, opts.ManifestAddOptions); err != nil {
		if created {
			s.mu.Lock()
			if _, derr := s.store.DeleteImage(id, true); derr != nil {
				s.logger.Warn("removing a manifest list whose creation failed", "list", stored, "error", derr)
			}
			s.mu.Unlock()
			s.Changed()
		}
		return "", err
	}
	return id, nil
}

// createLocked creates the empty list (or, with Amend, finds it). It
// reports whether it created the list.
func (m *ManifestLists) createLocked(name string, opts core.ManifestCreateOptions) (string, bool, error) {
	st := m.t.store.store
	if img, err := st.Image(name); err == nil {
		if opts.Amend && isManifestList(st, img) {
			if len(opts.IndexAnnotations) == 0 {
				return img.ID, false, nil
			}
			state, err := readListState(st, img.ID)
			if err != nil {
				return "", false, err
			}
			state.Annotations = mergeAnnotations(state.Annotations, opts.IndexAnnotations)
			return img.ID, false, writeListState(st, img.ID, state)
		}
		return "", false, fmt.Errorf("creating image to hold manifest list: image name %q is already associated with image %q: %w", name, img.ID, core.ErrDuplicateName)
	}
	state := &listState{Version: listVersionOCI, Annotations: maps.Clone(opts.IndexAnnotations)}
	items, d, err := listBigData(state)
	if err != nil {
		return "", false, err
	}
	img, err := st.CreateImage("", []string{name}, "", "", &storage.ImageOptions{
		CreationDate: time.Now().UTC(),
		Digest:       d,
		BigData:      items,
	})
	if errors.Is(err, storage.ErrDuplicateName) {
		return "", false, fmt.Errorf("image name %q is already in use: %w", name, core.ErrDuplicateName)
	}
	if err != nil {
		return "", false, fmt.Errorf("creating manifest list %s: %w", name, err)
	}
	return img.ID, true, nil
}

// listName validates a list name and returns its stored form (short names
// under localhost/, "latest" when untagged).
func listName(name string) (string, error) {
	if name == "" {
		return "", core.InvalidArgument("name", errors.New("a manifest list name is required"))
	}
	stored, err := normalizeName(name)
	if err != nil {
		return "", core.InvalidArgument("name", fmt.Errorf("%q: %w", name, err))
	}
	if strings.Contains(stored, "@") {
		return "", core.InvalidArgument("name", fmt.Errorf("%q: a manifest list name cannot be a digest", name))
	}
	return stored, nil
}

// Exists implements core.ManifestLists.
func (m *ManifestLists) Exists(ctx context.Context, name string) (bool, error) {
	s := m.t.store
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, err := m.findList(name)
	if errors.Is(err, core.ErrNoSuchManifestList) {
		return false, nil
	}
	return err == nil, err
}

// Inspect implements core.ManifestLists. A name that is no local list is
// read from its registry when it is fully qualified.
func (m *ManifestLists) Inspect(ctx context.Context, name string, opts core.ManifestInspectOptions) ([]byte, error) {
	state, err := m.readList(name)
	if err == nil {
		return state.inspect()
	}
	if !errors.Is(err, core.ErrNoSuchManifestList) {
		return nil, err
	}
	return m.remoteManifest(ctx, name, opts)
}

// remoteManifest returns the manifest a registry has for name.
func (m *ManifestLists) remoteManifest(ctx context.Context, name string, opts core.ManifestInspectOptions) ([]byte, error) {
	ref, err := RegistryReference("name", name)
	if err != nil {
		return nil, err
	}
	if shortnames.IsShortName(ref) {
		// Only a fully qualified name is looked up in a registry: a short
		// name that is no local list is not guessed at across registries.
		return nil, fmt.Errorf("%s: %w (a registry is only asked for a fully qualified name)", name, core.ErrNoSuchManifestList)
	}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return nil, core.InvalidArgument("name", err)
	}
	sys, cleanup, err := m.t.registryContext(opts.Auth, opts.TLSVerify)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	src, err := docker.NewReference(reference.TagNameOnly(named))
	if err != nil {
		return nil, core.InvalidArgument("name", err)
	}
	source, err := src.NewImageSource(ctx, sys)
	if err != nil {
		return nil, fmt.Errorf("%s: no local manifest list, and the registry: %w: %w", name, core.ErrNoSuchManifestList, err)
	}
	defer source.Close()
	raw, _, err := source.GetManifest(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: no local manifest list, and the registry: %w: %w", name, core.ErrNoSuchManifestList, err)
	}
	return raw, nil
}

// Add implements core.ManifestLists. The instances are read first (from
// storage or registries), then added in one write.
func (m *ManifestLists) Add(ctx context.Context, name string, images []string, opts core.ManifestAddOptions) (string, error) {
	if len(images) == 0 {
		return "", core.InvalidArgument("images", errors.New("at least one image is required"))
	}
	s := m.t.store
	s.mu.RLock()
	_, err := m.findList(name)
	s.mu.RUnlock()
	if err != nil {
		return "", err
	}
	sys, cleanup, err := m.t.registryContext(opts.Auth, opts.TLSVerify)
	if err != nil {
		return "", err
	}
	defer cleanup()
	var added []resolvedInstance
	for _, given := range images {
		found, err := m.resolveInstances(ctx, sys, given, opts.All)
		if err != nil {
			return "", err
		}
		added = append(added, found...)
	}
	return m.update(name, func(state *listState) error {
		for _, inst := range added {
			applyInstanceOptions(&inst.entry, opts.ManifestInstanceOptions)
			state.put(inst.entry, inst.source)
		}
		return nil
	})
}

// readList reads the named list's state under the store's read lock.
func (m *ManifestLists) readList(name string) (*listState, error) {
	s := m.t.store
	s.mu.RLock()
	defer s.mu.RUnlock()
	img, err := m.findList(name)
	if err != nil {
		return nil, err
	}
	return readListState(s.store, img.ID)
}

// update applies change to the named list's state under the store lock and
// saves it. It returns the list's ID.
func (m *ManifestLists) update(name string, change func(*listState) error) (string, error) {
	var id string
	err := m.writeLocked(name, func(img *storage.Image) error {
		state, err := readListState(m.t.store.store, img.ID)
		if err != nil {
			return err
		}
		if err := change(state); err != nil {
			return err
		}
		id = img.ID
		return writeListState(m.t.store.store, img.ID, state)
	})
	return id, err
}

// writeLocked runs fn on the named list's image under the store's write
// lock; the store's image cache is invalidated after.
func (m *ManifestLists) writeLocked(name string, fn func(img *storage.Image) error) error {
	s := m.t.store
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.cache.invalidate()
	img, err := m.findList(name)
	if err != nil {
		return err
	}
	return fn(img)
}

// resolvedInstance is an instance to add and where it is read from.
type resolvedInstance struct {
	entry  listEntry
	source string
}

// resolveInstances reads what given names: "containers-storage:NAME" a
// local image, "docker://REF" a registry image (all of a registry list's
// instances with all, else the one for this platform), and a bare name the
// local image of that name or, when there is none, the registry's.
func (m *ManifestLists) resolveInstances(ctx context.Context, sys *types.SystemContext, given string, all bool) ([]resolvedInstance, error) {
	if local, ok := strings.CutPrefix(given, "containers-storage:"); ok {
		return m.localInstance(ctx, local)
	}
	if !strings.HasPrefix(given, "docker://") {
		found, err := m.localInstance(ctx, given)
		if !errors.Is(err, core.ErrNoSuchImage) {
			return found, err
		}
	}
	name, err := RegistryReference("images", given)
	if err != nil {
		return nil, err
	}
	candidates, err := m.t.pullCandidates(sys, name)
	if err != nil {
		return nil, core.InvalidArgument("images", err)
	}
	var errs []error
	for _, named := range candidates {
		found, err := m.registryInstances(ctx, sys, named, all)
		if err == nil {
			return found, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// localInstance reads a local image as a list instance.
func (m *ManifestLists) localInstance(ctx context.Context, name string) ([]resolvedInstance, error) {
	s := m.t.store
	s.mu.RLock()
	img, err := s.find(name)
	var described *core.Image
	if err == nil {
		if isListImage(s.store, img) {
			err = core.InvalidArgument("images", fmt.Errorf("%s is a manifest list, not an image", name))
		} else {
			described, err = s.describe(img)
		}
	}
	s.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	ref, err := istorage.Transport.NewStoreReference(s.store, nil, img.ID)
	if err != nil {
		return nil, err
	}
	src, err := ref.NewImageSource(ctx, m.t.systemContext())
	if err != nil {
		return nil, fmt.Errorf("reading image %s: %w", name, err)
	}
	defer src.Close()
	raw, mimeType, err := src.GetManifest(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("reading the manifest of image %s: %w", name, err)
	}
	cfg := described.Config
	entry := listEntry{
		MediaType: mimeType,
		Digest:    digest.FromBytes(raw),
		Size:      int64(len(raw)),
		Platform: listPlatform{
			Architecture: cfg.Architecture,
			OS:           cfg.OS,
			OSVersion:    cfg.OSVersion,
			OSFeatures:   slices.Clone(cfg.OSFeatures),
			Variant:      cfg.Variant,
		},
	}
	return []resolvedInstance{{entry: entry, source: "containers-storage:" + img.ID}}, nil
}

// registryInstances reads a registry image (or list) as list instances.
func (m *ManifestLists) registryInstances(ctx context.Context, sys *types.SystemContext, named reference.Named, all bool) ([]resolvedInstance, error) {
	ref, err := docker.NewReference(named)
	if err != nil {
		return nil, core.InvalidArgument("images", err)
	}
	src, err := ref.NewImageSource(ctx, sys)
	if err != nil {
		return nil, classifyRegistryError(fmt.Errorf("reading %s: %w", named.String(), err))
	}
	defer src.Close()
	raw, mimeType, err := src.GetManifest(ctx, nil)
	if err != nil {
		return nil, classifyRegistryError(fmt.Errorf("reading %s: %w", named.String(), err))
	}
	repo := reference.TrimNamed(named)
	sourceOf := func(d digest.Digest) string { return "docker://" + repo.String() + "@" + d.String() }
	if !manifest.MIMETypeIsMultiImage(mimeType) {
		entry, err := imageEntry(ctx, sys, src, raw, mimeType, nil)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", named.String(), err)
		}
		return []resolvedInstance{{entry: entry, source: sourceOf(entry.Digest)}}, nil
	}
	list, err := manifest.ListFromBlob(raw, mimeType)
	if err != nil {
		return nil, fmt.Errorf("reading the list %s: %w", named.String(), err)
	}
	if !all {
		chosen, err := list.ChooseInstance(sys)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", named.String(), err)
		}
		instRaw, instType, err := src.GetManifest(ctx, &chosen)
		if err != nil {
			return nil, classifyRegistryError(fmt.Errorf("reading %s@%s: %w", named.String(), chosen, err))
		}
		entry, err := imageEntry(ctx, sys, src, instRaw, instType, &chosen)
		if err != nil {
			return nil, fmt.Errorf("reading %s@%s: %w", named.String(), chosen, err)
		}
		return []resolvedInstance{{entry: entry, source: sourceOf(entry.Digest)}}, nil
	}
	var out []resolvedInstance
	for _, d := range list.Instances() {
		info, err := list.Instance(d)
		if err != nil {
			return nil, err
		}
		entry := listEntry{MediaType: info.MediaType, Digest: info.Digest, Size: info.Size, Annotations: maps.Clone(info.ReadOnly.Annotations)}
		if p := info.ReadOnly.Platform; p != nil {
			entry.Platform = listPlatform{
				Architecture: p.Architecture, OS: p.OS, OSVersion: p.OSVersion,
				OSFeatures: slices.Clone(p.OSFeatures), Variant: p.Variant,
			}
		}
		out = append(out, resolvedInstance{entry: entry, source: sourceOf(d)})
	}
	return out, nil
}

// imageEntry describes one image manifest as a list entry, its platform
// read from its configuration.
func imageEntry(ctx context.Context, sys *types.SystemContext, src types.ImageSource, raw []byte, mimeType string, instance *digest.Digest) (listEntry, error) {
	entry := listEntry{MediaType: mimeType, Digest: digest.FromBytes(raw), Size: int64(len(raw))}
	img, err := image.FromUnparsedImage(ctx, sys, image.UnparsedInstance(src, instance))
	if err != nil {
		return entry, err
	}
	cfg, err := img.OCIConfig(ctx)
	if err != nil {
		return entry, err
	}
	entry.Platform = listPlatform{
		Architecture: cfg.Architecture, OS: cfg.OS, OSVersion: cfg.OSVersion,
		OSFeatures: slices.Clone(cfg.OSFeatures), Variant: cfg.Variant,
	}
	return entry, nil
}

// applyInstanceOptions overrides an entry's platform fields and merges annotations.
func applyInstanceOptions(e *listEntry, opts core.ManifestInstanceOptions) {
	if opts.OS != "" {
		e.Platform.OS = opts.OS
	}
	if opts.OSVersion != "" {
		e.Platform.OSVersion = opts.OSVersion
	}
	if opts.Arch != "" {
		e.Platform.Architecture = opts.Arch
	}
	if opts.Variant != "" {
		e.Platform.Variant = opts.Variant
	}
	if len(opts.OSFeatures) > 0 {
		e.Platform.OSFeatures = slices.Clone(opts.OSFeatures)
	}
	if len(opts.Features) > 0 {
		e.Platform.Features = slices.Clone(opts.Features)
	}
	e.Annotations = mergeAnnotations(e.Annotations, opts.Annotations)
}

// mergeAnnotations returns base with add's keys set (nil when both are empty).
func mergeAnnotations(base, add map[string]string) map[string]string {
	if len(add) == 0 {
		return base
	}
	out := maps.Clone(base)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, add)
	return out
}

// Annotate implements core.ManifestLists.
func (m *ManifestLists) Annotate(ctx context.Context, name, instance string, opts core.ManifestInstanceOptions) (string, error) {
	if instance == "" {
		if opts.OS != "" || opts.OSVersion != "" || opts.Arch != "" || opts.Variant != "" || len(opts.OSFeatures) > 0 || len(opts.Features) > 0 {
			return "", core.InvalidArgument("images", errors.New("platform fields need the instance to annotate"))
		}
		return m.update(name, func(state *listState) error {
			state.Annotations = mergeAnnotations(state.Annotations, opts.Annotations)
			return nil
		})
	}
	d, err := m.instanceDigest(ctx, instance)
	if err != nil {
		return "", err
	}
	return m.update(name, func(state *listState) error {
		e := state.entry(d)
		if e == nil {
			return fmt.Errorf("instance %s is not in list %s: %w", d, name, core.ErrNoSuchManifestList)
		}
		applyInstanceOptions(e, opts)
		return nil
	})
}

// instanceDigest reads an instance named by digest or by a local image.
func (m *ManifestLists) instanceDigest(ctx context.Context, instance string) (digest.Digest, error) {
	if d, err := digest.Parse(instance); err == nil {
		return d, nil
	}
	found, err := m.localInstance(ctx, instance)
	if errors.Is(err, core.ErrNoSuchImage) {
		return "", core.InvalidArgument("images", fmt.Errorf("%q is neither a digest nor a local image", instance))
	}
	if err != nil {
		return "", err
	}
	return found[0].entry.Digest, nil
}

// RemoveInstance implements core.ManifestLists.
func (m *ManifestLists) RemoveInstance(ctx context.Context, name, instanceDigest string) (string, error) {
	d, err := digest.Parse(instanceDigest)
	if err != nil {
		return "", core.InvalidArgument("digest", fmt.Errorf("%q: %w", instanceDigest, err))
	}
	return m.update(name, func(state *listState) error {
		if !state.remove(d) {
			return fmt.Errorf("instance %s is not in list %s: %w", d, name, core.ErrNoSuchManifestList)
		}
		return nil
	})
}

// Delete implements core.ManifestLists.
func (m *ManifestLists) Delete(ctx context.Context, name string) (core.ImageRemoveReport, error) {
	report := core.ImageRemoveReport{ExitCode: 1}
	err := m.writeLocked(name, func(img *storage.Image) error {
		if _, err := m.t.store.store.DeleteImage(img.ID, true); err != nil {
			report.ExitCode = 125
			return fmt.Errorf("removing manifest list %s: %w", name, err)
		}
		report = core.ImageRemoveReport{Untagged: slices.Clone(img.Names), Deleted: []string{img.ID}}
		return nil
	})
	return report, err
}

// Push implements core.ManifestLists.
func (m *ManifestLists) Push(ctx context.Context, name, destination string, opts core.ManifestPushOptions) (_ string, err error) {
	defer m.t.observe("manifest_push", time.Now(), &err)
	dest, err := RegistryReference("destination", destination)
	if err != nil {
		return "", err
	}
	named, err := reference.ParseNormalizedNamed(dest)
	if err != nil {
		return "", core.InvalidArgument("destination", err)
	}
	named = reference.TagNameOnly(named)
	mimeType, err := manifestMIMEType(opts.Format)
	if err != nil {
		return "", err
	}
	state, err := m.readList(name)
	if err != nil {
		return "", err
	}
	sys, cleanup, err := m.t.pushContext(opts.Auth, opts.TLSVerify, opts.CompressionFormat)
	if err != nil {
		return "", err
	}
	defer cleanup()
	destRef, err := docker.NewReference(named)
	if err != nil {
		return "", core.InvalidArgument("destination", err)
	}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	selection := copy.CopySpecificImages
	if opts.All {
		selection = copy.CopyAllImages
	}
	src := &listReference{name: name, state: state, store: m.t.store.store}
	copyOpts := &copy.Options{
		ReportWriter:          progress,
		SourceCtx:             sys,
		DestinationCtx:        sys,
		RemoveSignatures:      opts.RemoveSignatures,
		ForceManifestMIMEType: mimeType,
		ImageListSelection:    selection,
	}
	stop := func() {}
	if opts.Blobs != nil {
		stop = reportBlobs(copyOpts, opts.Blobs)
	}
	pushed, err := m.t.copyImage(ctx, destRef, src, copyOpts)
	stop()
	if err != nil {
		return "", classifyRegistryError(fmt.Errorf("pushing manifest list %s to %s: %w", name, named.String(), err))
	}
	return digest.FromBytes(pushed).String(), nil
}
