package containers

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	securejoin "github.com/cyphar/filepath-securejoin"
	"golang.org/x/sys/unix"

	"github.com/berth-project/berth/engine/internal/core"
)

// Volume subpaths (Podman 5's --mount type=volume,...,subpath=DIR, Docker's
// VolumeOptions.Subpath): the part of a volume a container mounts is
// opened inside the volume's root, symbolic links resolved as if that root
// were "/", so that none leads out of the volume; the open handle, not a
// path, is then bound at STATICDIR/volsub/N, from where the runtime binds
// it into the container. A container that swaps a directory of the volume
// for a link between the check and the mount changes nothing: the handle
// names what was checked. The staging mount is only needed while the
// runtime makes its own, and goes right after the runtime's create (or
// restore); a kill -9 in between leaves a mount below the container's
// directory, which its next start, its cleanup or its removal detaches.

// subPathStage is where the part of volume i of a container is staged.
func subPathStage(static string, i int) string {
	return filepath.Join(static, "volsub", strconv.Itoa(i))
}

// makeSubPathStages makes the staging places that do not exist yet, as
// the spec's bind sources must exist when it is written; each start makes
// its place anew, of the kind the volume's part is then.
func makeSubPathStages(rec *record) error {
	for i, v := range rec.Volumes {
		if v.SubPath == "" {
			continue
		}
		stage := subPathStage(rec.StaticDir, i)
		if _, err := os.Lstat(stage); err == nil {
			continue
		}
		if err := os.MkdirAll(stage, 0o700); err != nil {
			return err
		}
	}
	return nil
}

// stageSubPaths binds the parts of rec's volumes that it mounts at their
// staging places, after detaching what an earlier run left there. The
// volumes are mounted already.
func stageSubPaths(rec *record) (err error) {
	if !slices.ContainsFunc(rec.Volumes, func(v mountedVolume) bool { return v.SubPath != "" }) {
		return nil
	}
	unstageSubPaths(rec.StaticDir)
	defer func() {
		if err != nil {
			unstageSubPaths(rec.StaticDir)
		}
	}()
	for i, v := range rec.Volumes {
		if v.SubPath == "" {
			continue
		}
		if err := stageSubPath(v, subPathStage(rec.StaticDir, i)); err != nil {
			return err
		}
	}
	return nil
}

// stageSubPath binds the part of one volume at stage.
func stageSubPath(v mountedVolume, stage string) error {
	f, err := securejoin.OpenInRoot(v.Source, v.SubPath)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
			return core.InvalidArgument("volumes", fmt.Errorf("volume %s has no %s to mount at %s", v.Name, v.SubPath, v.Dest))
		}
		return fmt.Errorf("volume %s: open %s: %w", v.Name, v.SubPath, err)
	}
	defer f.Close()
	fd := int(f.Fd())
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("volume %s: %s: %w", v.Name, v.SubPath, err)
	}
	if err := os.MkdirAll(filepath.Dir(stage), 0o700); err != nil {
		return err
	}
	// An earlier run may have staged the other kind (a directory that is a
	// file now): the place is made anew, empty, for the bind to cover.
	if err := os.Remove(stage); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("volume %s: staging place: %w", v.Name, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		err = os.Mkdir(stage, 0o700)
	} else {
		err = os.WriteFile(stage, nil, 0o600)
	}
	if err != nil {
		return fmt.Errorf("volume %s: staging place: %w", v.Name, err)
	}
	if err := unix.Mount("/proc/self/fd/"+strconv.Itoa(fd), stage, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("volume %s: bind %s: %w", v.Name, v.SubPath, err)
	}
	return nil
}

// unstageSubPaths detaches every staged volume part of a container.
func unstageSubPaths(static string) { unmountPerRunDir(static, "volsub", false) }
