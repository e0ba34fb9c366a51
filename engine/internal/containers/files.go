package containers

import (
	"context"
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

// Changes lists the paths the container changed relative to its image.
func (m *Manager) Changes(ctx context.Context, nameOrID string) ([]core.FileChange, error) {
	e, err := m.lookup(nameOrID)
	if err != nil {
		return nil, err
	}
	rec := m.snapshot(e)
	sc, err := m.store.Container(rec.ID)
	if err != nil {
		return nil, fmt.Errorf("container %s storage: %w", rec.Name, err)
	}
	changes, err := m.store.Changes("", sc.LayerID)
	if err != nil {
		return nil, fmt.Errorf("changes of %s: %w", rec.Name, err)
	}
	out := make([]core.FileChange, 0, len(changes))
	for _, c := range changes {
		out = append(out, core.FileChange{Path: c.Path, Kind: int(c.Kind)})
	}
	return out, nil
}
