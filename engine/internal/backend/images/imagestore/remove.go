package imagestore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/containers/storage"

	"github.com/berth-project/berth/engine/internal/core"
)

// Remove implements core.Images. A name that is one of several tags of an
// image only untags it; an ID (or the last name) removes the image, which
// needs force when the image has other tags (by ID) or is used by
// containers. Forced removal removes those containers first. Dangling
// parents left behind are removed too unless NoPrune.
func (s *Store) Remove(ctx context.Context, namesOrIDs []string, opts core.ImageRemoveOptions) (core.ImageRemoveReport, []error) {
	report := core.ImageRemoveReport{}
	var errs []error
	fail := func(err error) {
		errs = append(errs, err)
		switch {
		case errors.Is(err, core.ErrNoSuchImage):
			if report.ExitCode == 0 {
				report.ExitCode = 1
			}
		case errors.Is(err, core.ErrImageInUse):
			if report.ExitCode == 0 || report.ExitCode == 1 {
				report.ExitCode = 2
			}
		default:
			report.ExitCode = 125
		}
	}
	defer s.cache.invalidate()

	if opts.All {
		// Children first, so each parent is deleted (and reported) once
		// nothing is built on it any more.
		s.mu.RLock()
		snap, err := s.snapshot()
		s.mu.RUnlock()
		if err != nil {
			fail(err)
			return report, errs
		}
		views := slices.Clone(snap.views)
		// A child has more layers than its parent, or as many and a longer history.
		depth := func(v *imageView) int {
			return len(layerChain(v.img.TopLayer, snap.layerByID))*1_000_000 + len(v.entry.history)
		}
		slices.SortStableFunc(views, func(a, b *imageView) int { return depth(b) - depth(a) })
		namesOrIDs = namesOrIDs[:0:0]
		for _, v := range views {
			namesOrIDs = append(namesOrIDs, v.img.ID)
		}
	}
	for _, name := range namesOrIDs {
		if err := ctx.Err(); err != nil {
			fail(err)
			break
		}
		if err := s.removeOne(ctx, name, opts, &report, opts.All); err != nil {
			// With all, an image may already have gone as a dangling parent.
			if (opts.Ignore || opts.All) && errors.Is(err, core.ErrNoSuchImage) {
				continue
			}
			fail(err)
		}
	}
	return report, errs
}

// removeOne removes or untags one image named by name.
func (s *Store) removeOne(ctx context.Context, name string, opts core.ImageRemoveOptions, report *core.ImageRemoveReport, all bool) error {
	s.mu.RLock()
	img, err := s.find(name)
	s.mu.RUnlock()
	if err != nil {
		return err
	}
	byID := all || isIDOf(name, img.ID)
	byDigest := strings.HasPrefix(name, "sha256:") || strings.Contains(name, "@")

	if !all && len(img.Names) > 1 {
		switch {
		case (byID || byDigest) && !opts.Force:
			return fmt.Errorf("unable to delete image %q by ID or digest with more than one tag (%s): please force removal: %w",
				img.ID, strings.Join(img.Names, ", "), core.ErrImageInUse)
		case !byID && !byDigest:
			// A tag among several: untag only.
			stored, err := s.storedName(name, img)
			if err != nil {
				return err
			}
			s.mu.Lock()
			err = s.store.RemoveNames(img.ID, []string{stored})
			s.mu.Unlock()
			if err != nil {
				return fmt.Errorf("untagging %s: %w", stored, err)
			}
			report.Untagged = append(report.Untagged, stored)
			s.emit(ctx, "untag", img.ID, stored)
			return nil
		}
	}

	users, err := s.containersUsing(ctx, img.ID)
	if err != nil {
		return err
	}
	if len(users) > 0 {
		if !opts.Force {
			return fmt.Errorf("image %s is used by container(s) %s: %w", shortID(img.ID), strings.Join(shortIDs(users), ", "), core.ErrImageInUse)
		}
		if opts.KeepContainers {
			return s.untagForContainers(ctx, img, name, byID || byDigest, report)
		}
		if err := s.removeContainers(ctx, img.ID, users); err != nil {
			return err
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	// Like Podman, an image with children is deleted but not reported as
	// deleted: its layers stay, in use by the children.
	children, parent, err := s.family(img.ID)
	if err != nil {
		return err
	}
	if err := s.deleteImage(ctx, img, report, children == 0); err != nil {
		return err
	}
	if !opts.NoPrune {
		s.pruneParents(ctx, parent, report)
	}
	return nil
}

// untagForContainers removes from img, which containers use, the name it was
// asked to be removed by, or every name (all) when that was its ID or a
// digest; the image stays for the containers, dangling once it has no name.
func (s *Store) untagForContainers(ctx context.Context, img *storage.Image, name string, all bool, report *core.ImageRemoveReport) error {
	names := img.Names
	if !all {
		stored, err := s.storedName(name, img)
		if err != nil {
			return err
		}
		names = []string{stored}
	}
	if len(names) == 0 {
		return nil
	}
	s.mu.Lock()
	err := s.store.RemoveNames(img.ID, names)
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("untagging image %s: %w", shortID(img.ID), err)
	}
	for _, n := range names {
		report.Untagged = append(report.Untagged, n)
		s.emit(ctx, "untag", img.ID, n)
	}
	return nil
}

// deleteImage deletes img and the layers only it used, recording what went.
func (s *Store) deleteImage(ctx context.Context, img *storage.Image, report *core.ImageRemoveReport, reportDeleted bool) error {
	layers, err := s.store.DeleteImage(img.ID, true)
	if err != nil {
		if errors.Is(err, storage.ErrImageUnknown) {
			return core.NoSuchImage(shortID(img.ID))
		}
		if errors.Is(err, storage.ErrImageUsedByContainer) {
			return fmt.Errorf("image %s: %w", shortID(img.ID), core.ErrImageInUse)
		}
		return fmt.Errorf("removing image %s: %w", shortID(img.ID), err)
	}
	report.Untagged = append(report.Untagged, img.Names...)
	if reportDeleted {
		report.Deleted = append(report.Deleted, img.ID)
		report.DockerDeleted = append(report.DockerDeleted, img.ID)
	}
	report.DockerDeleted = append(report.DockerDeleted, layers...)
	name := img.ID
	for _, n := range img.Names {
		s.emit(ctx, "untag", img.ID, n)
		name = n
	}
	s.emit(ctx, "remove", img.ID, name)
	return nil
}

// pruneParents removes parent and its ancestors while each is untagged,
// unused and has no other children.
func (s *Store) pruneParents(ctx context.Context, parent *storage.Image, report *core.ImageRemoveReport) {
	for parent != nil && len(parent.Names) == 0 {
		children, next, err := s.family(parent.ID)
		if err != nil || children > 0 {
			return
		}
		if used, err := s.storageContainersUsing(parent.ID); err != nil || len(used) > 0 {
			return
		}
		if err := s.deleteImage(ctx, parent, report, true); err != nil {
			return
		}
		parent = next
	}
}

// family returns the number of child images of id and its parent image, as
// the listing computes them.
func (s *Store) family(id string) (children int, parent *storage.Image, err error) {
	snap, err := s.snapshot()
	if err != nil {
		return 0, nil, err
	}
	v := snap.byID[id]
	if v == nil {
		return 0, nil, core.NoSuchImage(shortID(id))
	}
	if p := snap.byID[v.parentID]; p != nil {
		parent = p.img
	}
	return v.children, parent, nil
}

// containersUsing asks the container backend (and storage) which containers use imageID.
func (s *Store) containersUsing(ctx context.Context, imageID string) ([]string, error) {
	s.settleRemovals()
	s.mu.RLock()
	users := s.users
	inStorage, err := s.storageContainersUsing(imageID)
	s.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	ids := inStorage
	if users != nil {
		known, err := users.ContainersUsingImage(ctx, imageID)
		if err != nil {
			return nil, fmt.Errorf("listing containers of image %s: %w", shortID(imageID), err)
		}
		for _, id := range known {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	return ids, nil
}

// settleRemovals waits until the containers removed so far are gone from
// storage: their layers are deleted in the background, and until then
// storage counts them as users of their images.
func (s *Store) settleRemovals() {
	s.mu.RLock()
	users := s.users
	s.mu.RUnlock()
	if users != nil {
		users.SettleRemovals()
	}
}

// storageContainersUsing lists the storage containers created from imageID.
func (s *Store) storageContainersUsing(imageID string) ([]string, error) {
	containers, err := s.store.Containers()
	if err != nil {
		return nil, fmt.Errorf("listing containers: %w", err)
	}
	var ids []string
	for _, c := range containers {
		if c.ImageID == imageID {
			ids = append(ids, c.ID)
		}
	}
	return ids, nil
}

// removeContainers removes the containers using imageID: through the container
// backend where it knows them, else their storage directly.
func (s *Store) removeContainers(ctx context.Context, imageID string, ids []string) error {
	s.mu.RLock()
	users := s.users
	s.mu.RUnlock()
	for _, id := range ids {
		if users != nil {
			if err := users.RemoveContainer(ctx, id); err != nil && !errors.Is(err, core.ErrNoSuchContainer) {
				return fmt.Errorf("removing container %s of image %s: %w", shortID(id), shortID(imageID), err)
			}
		}
		// The container backend may not know a storage container (one made
		// by another tool, or left by a crash): its storage goes all the same.
		s.mu.Lock()
		err := s.store.DeleteContainer(id)
		s.mu.Unlock()
		if err != nil && !errors.Is(err, storage.ErrContainerUnknown) && !errors.Is(err, storage.ErrNotAContainer) {
			return fmt.Errorf("removing container %s of image %s: %w", shortID(id), shortID(imageID), err)
		}
	}
	return nil
}

// storedName maps the name a user gave to the image's stored name it refers to.
func (s *Store) storedName(name string, img *storage.Image) (string, error) {
	if slices.Contains(img.Names, name) {
		return name, nil
	}
	ref, err := ParseReference(name)
	if err != nil {
		return "", err
	}
	for _, c := range s.candidates(ref) {
		if slices.Contains(img.Names, c.String()) {
			return c.String(), nil
		}
	}
	for _, stored := range img.Names {
		if strings.HasSuffix(strings.SplitN(stored, "@", 2)[0], "/"+strings.TrimPrefix(pathAndTag(ref), "/")) {
			return stored, nil
		}
	}
	return "", fmt.Errorf("%s is not a name of image %s: %w", name, shortID(img.ID), core.ErrNoSuchImage)
}

// pathAndTag is the path:tag of a parsed reference, for suffix matching.
func pathAndTag(ref Reference) string {
	tag := "latest"
	if t, ok := ref.Named.(interface{ Tag() string }); ok {
		tag = t.Tag()
	}
	return ref.Path + ":" + tag
}

// isIDOf reports whether name is img's ID or an ID prefix of it.
func isIDOf(name, id string) bool {
	name = strings.TrimPrefix(name, "sha256:")
	return hexID.MatchString(name) && strings.HasPrefix(id, name)
}

// shortIDs abbreviates IDs.
func shortIDs(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = shortID(id)
	}
	return out
}
