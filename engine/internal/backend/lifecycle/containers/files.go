package containers

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/containers/storage/pkg/archive"

	"github.com/berth-project/berth/engine/internal/core"
)

var _ core.ContainerFilesystems = (*Manager)(nil)

// Export streams the container's root filesystem as a tar. The rootfs is
// held mounted (as a client mount) while it is read.
func (m *Manager) Export(ctx context.Context, nameOrID string, w io.Writer) error {
	rootfs, err := m.Mount(ctx, nameOrID)
	if err != nil {
		return err
	}
	defer m.Unmount(context.WithoutCancel(ctx), nameOrID)
	tr, err := archive.Tar(rootfs, archive.Uncompressed)
	if err != nil {
		return fmt.Errorf("export %s: %w", nameOrID, err)
	}
	defer tr.Close()
	done := make(chan struct{})
	defer close(done)
	go func() {
		// A client that goes away stops the copy.
		select {
		case <-ctx.Done():
			tr.Close()
		case <-done:
		}
	}()
	if _, err := io.Copy(w, tr); err != nil {
		return fmt.Errorf("export %s: %w", nameOrID, err)
	}
	return nil
}

// initPaths are the paths the engine and runc create in every container
// for its mounts; changes leave them out, as Podman does.
var initPaths = map[string]bool{
	"/dev": true, "/etc/hostname": true, "/etc/hosts": true, "/etc/resolv.conf": true, "/proc": true,
	"/run": true, "/run/notify": true, "/run/.containerenv": true, "/run/secrets": true,
	"/sys": true, "/etc/mtab": true,
}

// Changes lists the paths a container's or an image's top layer changed
// relative to the layer below it, or to opts.Parent's top layer. With
// DiffAll a name is looked up as an image first, then as a container.
func (m *Manager) Changes(ctx context.Context, nameOrID string, opts core.ChangesOptions) ([]core.FileChange, error) {
	kind := opts.Kind
	if kind == "" {
		kind = core.DiffAll
	}
	if kind != core.DiffAll && kind != core.DiffContainer && kind != core.DiffImage {
		return nil, core.InvalidArgument("diffType", fmt.Errorf("%q is not all, container or image", opts.Kind))
	}
	to, err := m.topLayer(ctx, nameOrID, kind)
	if err != nil {
		return nil, err
	}
	from := ""
	if opts.Parent != "" {
		if from, err = m.topLayer(ctx, opts.Parent, kind); err != nil {
			return nil, err
		}
	}
	changes, err := m.store.Changes(from, to)
	if err != nil {
		return nil, fmt.Errorf("changes of %s: %w", nameOrID, err)
	}
	out := make([]core.FileChange, 0, len(changes))
	for _, c := range changes {
		if !initPaths[c.Path] {
			out = append(out, core.FileChange{Path: c.Path, Kind: int(c.Kind)})
		}
	}
	return out, nil
}

// topLayer is the top layer of the image or container a name means.
func (m *Manager) topLayer(ctx context.Context, nameOrID, kind string) (string, error) {
	if kind != core.DiffContainer {
		img, err := m.images.Lookup(ctx, nameOrID)
		if err == nil {
			if img.TopLayer == "" {
				return "", core.InvalidArgument("name", fmt.Errorf("image %s has no layers", nameOrID))
			}
			return img.TopLayer, nil
		}
		if kind == core.DiffImage || !errors.Is(err, core.ErrNoSuchImage) {
			return "", err
		}
	}
	e, err := m.lookup(nameOrID)
	if err != nil {
		if kind == core.DiffAll && errors.Is(err, core.ErrNoSuchContainer) {
			return "", fmt.Errorf("%s: no such image or container: %w", nameOrID, core.ErrNoSuchContainer)
		}
		return "", err
	}
	rec := m.snapshot(e)
	if rec.Spec.Rootfs != "" {
		return "", errNoLayers(rec.Name)
	}
	sc, err := m.store.Container(rec.ID)
	if err != nil {
		return "", fmt.Errorf("container %s storage: %w", rec.Name, err)
	}
	return sc.LayerID, nil
}
