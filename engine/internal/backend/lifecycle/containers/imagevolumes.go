package containers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/berth-project/berth/engine/internal/backend/platform/mounts"
	"github.com/berth-project/berth/engine/internal/core"
)

// Image volumes (podman's --mount type=image, Docker's type=image): each is
// an overlay of the image's layers (their diff directories in the overlay
// store, read-only) that the engine mounts per container at
// STATICDIR/imgvol/N/merged when the container starts, binds at the
// destination, and unmounts when it exits or is removed. With ReadWrite
// the overlay gets an upper layer in the same directory, emptied at each
// mount, so changes last one run. Mounts of its own, not the store's
// counted image mounts: a kill -9 leaves at most mounts below the
// container's directory, which its next start, its cleanup or its removal
// detaches. An image a container mounts this way is in use: it cannot be
// removed without force.

// imageVolumeDir is where image volume i of a container is mounted.
func imageVolumeDir(static string, i int) string {
	return filepath.Join(static, "imgvol", strconv.Itoa(i))
}

// resolveImageVolumes checks the image volumes of a create and records
// each image by ID.
func (m *Manager) resolveImageVolumes(ctx context.Context, spec *core.ContainerSpec) error {
	if len(spec.ImageVolumes) > 0 && m.store.GraphDriverName() != "overlay" {
		return core.InvalidArgument("image_volumes", fmt.Errorf("image volumes need the overlay storage driver, not %s", m.store.GraphDriverName()))
	}
	for i := range spec.ImageVolumes {
		iv := &spec.ImageVolumes[i]
		field := fmt.Sprintf("image_volumes[%d]", i)
		if !path.IsAbs(iv.Destination) || path.Clean(iv.Destination) == "/" {
			return core.InvalidArgument(field, fmt.Errorf("destination %q is not an absolute path below /", iv.Destination))
		}
		iv.Destination = path.Clean(iv.Destination)
		if iv.SubPath != "" {
			clean := path.Clean("/" + iv.SubPath)
			if clean != "/"+strings.TrimPrefix(iv.SubPath, "/") || strings.Contains(iv.SubPath, "..") {
				return core.InvalidArgument(field, fmt.Errorf("subpath %q is not a clean path inside the image", iv.SubPath))
			}
			iv.SubPath = strings.TrimPrefix(clean, "/")
		}
		if destinationTaken(spec, iv.Destination) {
			return core.InvalidArgument(field, fmt.Errorf("duplicate mount destination %s", iv.Destination))
		}
		img, err := m.images.Lookup(ctx, iv.Source)
		if err != nil {
			return core.InvalidArgument(field, fmt.Errorf("image %q: %v", iv.Source, err))
		}
		iv.Source = img.ID
	}
	seen := map[string]bool{}
	for i, iv := range spec.ImageVolumes {
		if seen[iv.Destination] {
			return core.InvalidArgument(fmt.Sprintf("image_volumes[%d]", i), fmt.Errorf("duplicate mount destination %s", iv.Destination))
		}
		seen[iv.Destination] = true
	}
	return nil
}

// destinationTaken reports whether a mount or volume of the request has
// exactly dest as its destination.
func destinationTaken(s *core.ContainerSpec, dest string) bool {
	for _, m := range s.Mounts {
		if path.Clean(m.Destination) == dest {
			return true
		}
	}
	for _, v := range s.Volumes {
		if path.Clean(v.Dest) == dest {
			return true
		}
	}
	return false
}

// imageVolumeBinds are the bind mounts of rec's image volumes, from where
// mountImageVolumes mounts them. The directories are made now, as the
// spec's bind sources must exist (the mount hides them later).
func imageVolumeBinds(rec *record) ([]specs.Mount, error) {
	var out []specs.Mount
	for i, iv := range rec.Spec.ImageVolumes {
		if err := os.MkdirAll(filepath.Join(imageVolumeDir(rec.StaticDir, i), "merged", filepath.FromSlash(iv.SubPath)), 0o755); err != nil {
			return nil, err
		}
		opts := []string{"rbind", "nosuid", "nodev"}
		if !iv.ReadWrite {
			opts = append(opts, "ro")
		}
		src := filepath.Join(imageVolumeDir(rec.StaticDir, i), "merged", filepath.FromSlash(iv.SubPath))
		out = append(out, specs.Mount{Destination: iv.Destination, Type: "bind", Source: src, Options: opts})
	}
	return out, nil
}

// mountImageVolumes mounts rec's image volumes, first detaching what a
// killed engine left there.
func (m *Manager) mountImageVolumes(ctx context.Context, rec *record) (err error) {
	if len(rec.Spec.ImageVolumes) == 0 {
		return nil
	}
	unmountImageVolumes(rec.StaticDir)
	defer func() {
		if err != nil {
			unmountImageVolumes(rec.StaticDir)
		}
	}()
	driverDir := filepath.Join(m.store.GraphRoot(), m.store.GraphDriverName())
	for i, iv := range rec.Spec.ImageVolumes {
		img, err := m.images.Lookup(ctx, iv.Source)
		if err != nil {
			return fmt.Errorf("image volume at %s: %w", iv.Destination, err)
		}
		dir := imageVolumeDir(rec.StaticDir, i)
		for _, sub := range []string{"upper", "work"} {
			if err := os.RemoveAll(filepath.Join(dir, sub)); err != nil {
				return err
			}
		}
		// Overlay mounts at least two lower layers without an upper one:
		// an empty one goes at the bottom.
		for _, sub := range []string{"merged", "empty"} {
			if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
				return err
			}
		}
		var lower []string
		for _, layer := range img.Layers {
			lower = append(lower, layerDiffDir(driverDir, layer))
		}
		lower = append(lower, filepath.Join(dir, "empty"))
		opts := "lowerdir=" + strings.Join(lower, ":")
		if iv.ReadWrite {
			for _, sub := range []string{"upper", "work"} {
				if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
					return err
				}
			}
			opts += ",upperdir=" + filepath.Join(dir, "upper") + ",workdir=" + filepath.Join(dir, "work")
		}
		if len(opts) >= os.Getpagesize() {
			return fmt.Errorf("image volume at %s: image %s has too many layers for one overlay mount", iv.Destination, iv.Source[:12])
		}
		flags := uintptr(unix.MS_NODEV | unix.MS_NOSUID)
		if !iv.ReadWrite {
			flags |= unix.MS_RDONLY
		}
		if err := unix.Mount("overlay", filepath.Join(dir, "merged"), "overlay", flags, opts); err != nil {
			return fmt.Errorf("mount image %s at %s: %w", iv.Source[:12], iv.Destination, err)
		}
		if iv.SubPath != "" {
			fi, err := os.Stat(filepath.Join(dir, "merged", filepath.FromSlash(iv.SubPath)))
			if err != nil || !fi.IsDir() {
				return fmt.Errorf("image volume at %s: %s is not a directory of image %s: %w", iv.Destination, iv.SubPath, iv.Source[:12], core.ErrInvalidArgument)
			}
		}
	}
	return nil
}

// layerDiffDir is a layer's diff directory in the overlay store, named by
// its short link where the store made one (shorter mount options).
func layerDiffDir(driverDir, layer string) string {
	if link, err := os.ReadFile(filepath.Join(driverDir, layer, "link")); err == nil {
		if short := strings.TrimSpace(string(link)); short != "" && !strings.ContainsAny(short, "/:,") {
			if _, err := os.Stat(filepath.Join(driverDir, "l", short)); err == nil {
				return filepath.Join(driverDir, "l", short)
			}
		}
	}
	return filepath.Join(driverDir, layer, "diff")
}

// unmountImageVolumes detaches a container's image volumes and drops
// their upper layers.
func unmountImageVolumes(static string) { unmountPerRunDir(static, "imgvol", true) }

// unmountPerRunDir detaches every mount below STATICDIR/sub (image
// volumes, overlays, staged volume parts: what a run mounts there and a
// kill -9 may leave) and, with layers, drops the upper and work
// directories of each entry, which the next mount makes anew.
func unmountPerRunDir(static, sub string, layers bool) {
	if static == "" {
		return
	}
	root := filepath.Join(static, sub)
	if _, err := os.Stat(root); errors.Is(err, os.ErrNotExist) {
		return
	}
	mounts.UnmountUnder(root, nil)
	if !layers {
		return
	}
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		for _, d := range []string{"upper", "work"} {
			os.RemoveAll(filepath.Join(root, e.Name(), d))
		}
	}
}

// usesImageVolume reports whether rec mounts imageID as an image volume.
func usesImageVolume(rec *record, imageID string) bool {
	for _, iv := range rec.Spec.ImageVolumes {
		if iv.Source == imageID {
			return true
		}
	}
	return false
}

// mountPerRun mounts what the engine makes on the host side for each run
// of rec: its shareable /dev/shm and its image volumes.
func (m *Manager) mountPerRun(ctx context.Context, rec *record) error {
	if err := mountShm(rec); err != nil {
		return err
	}
	if err := m.mountImageVolumes(ctx, rec); err != nil {
		unmountShm(rec.StaticDir)
		return err
	}
	return nil
}

// unmountPerRun undoes mountPerRun (also for what a crash left).
func unmountPerRun(static string) {
	unmountShm(static)
	unmountImageVolumes(static)
	unstageSubPaths(static)
	unmountOverlays(static)
}
