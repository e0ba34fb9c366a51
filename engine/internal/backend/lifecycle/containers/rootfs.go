package containers

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/berth-project/berth/engine/internal/backend/platform/mounts"
	"github.com/berth-project/berth/engine/internal/core"
)

// A container made with --rootfs PATH has no image: its root is a
// directory of the host. It still gets a storage container (an empty
// layer), which gives it its directories and the removal, crash repair and
// accounting every container has; only its root comes from elsewhere:
//
//   - PATH itself (changes are written to the host's directory, as with
//     Podman), nothing mounted;
//   - PATH:O (rootfs_overlay): an overlay with PATH as its lower layer and
//     an upper layer in the container's directory, mounted at
//     STATICDIR/rootfs/merged. The upper layer is emptied at each mount
//     and removed at each unmount, so changes last one run, as Podman's
//     "destroyed when the container finishes executing", and are gone
//     with the container in any case.

// overlayRoot is where a PATH:O container's overlay lives.
func overlayRoot(static string) string { return filepath.Join(static, "rootfs") }

// checkRootfs checks a --rootfs request against the host (create and start).
func checkRootfs(s *core.ContainerSpec) error {
	if s.Rootfs == "" {
		return nil
	}
	p := s.Rootfs
	if !filepath.IsAbs(p) {
		return core.InvalidArgument("rootfs", fmt.Errorf("%q is not an absolute path", p))
	}
	if filepath.Clean(p) == "/" {
		return core.InvalidArgument("rootfs", errors.New("the host's root directory cannot be a container's root"))
	}
	if s.RootfsOverlay && strings.ContainsAny(p, ",:") {
		return core.InvalidArgument("rootfs", fmt.Errorf("%q: an overlay's lower directory cannot hold a comma or a colon", p))
	}
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return core.InvalidArgument("rootfs", fmt.Errorf("%s does not exist", p))
	case err != nil:
		return core.InvalidArgument("rootfs", err)
	case !fi.IsDir():
		return core.InvalidArgument("rootfs", fmt.Errorf("%s is not a directory", p))
	}
	return nil
}

// mountRoot mounts a container's root filesystem and returns its path: the
// image's layers (containers/storage), or for --rootfs the host directory
// or an overlay on it.
func (m *Manager) mountRoot(id string, s *core.ContainerSpec) (string, error) {
	if s.Rootfs == "" {
		return m.store.Mount(id, "")
	}
	if !s.RootfsOverlay {
		return filepath.Clean(s.Rootfs), nil
	}
	static, err := m.store.ContainerDirectory(id)
	if err != nil {
		return "", err
	}
	dir := overlayRoot(static)
	merged := filepath.Join(dir, "merged")
	// A mount left by a killed engine goes first; so does the last run's
	// upper layer.
	if _, err := mounts.UnmountUnder(merged, nil); err != nil {
		return "", err
	}
	for _, sub := range []string{"upper", "work"} {
		if err := os.RemoveAll(filepath.Join(dir, sub)); err != nil {
			return "", err
		}
	}
	for _, sub := range []string{"upper", "work", "merged"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return "", err
		}
	}
	if err := os.Chmod(merged, 0o755); err != nil {
		return "", err
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", filepath.Clean(s.Rootfs), filepath.Join(dir, "upper"), filepath.Join(dir, "work"))
	if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		return "", fmt.Errorf("mount an overlay on %s: %w", s.Rootfs, err)
	}
	return merged, nil
}

// unmountRoot undoes mountRoot; a PATH:O container's changes go with it.
func (m *Manager) unmountRoot(id string, s *core.ContainerSpec) error {
	if s.Rootfs == "" {
		_, err := m.store.Unmount(id, true)
		return err
	}
	if !s.RootfsOverlay {
		return nil
	}
	static, err := m.store.ContainerDirectory(id)
	if err != nil {
		return err
	}
	return discardOverlay(overlayRoot(static))
}

// discardOverlay unmounts a PATH:O overlay and removes its upper layer
// (also for a container without record, whose overlay a crash left).
func discardOverlay(dir string) error {
	if _, err := mounts.UnmountUnder(filepath.Join(dir, "merged"), nil); err != nil {
		return err
	}
	for _, sub := range []string{"upper", "work"} {
		if err := os.RemoveAll(filepath.Join(dir, sub)); err != nil {
			return err
		}
	}
	return nil
}

// errNoLayers refuses what needs a container's layers (commit, diff) for a
// container whose root is a host directory.
func errNoLayers(name string) error {
	return core.InvalidArgument("container", fmt.Errorf("%s was made from a root filesystem (--rootfs), not an image: it has no layers to commit or compare", name))
}
