package containers

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	securejoin "github.com/cyphar/filepath-securejoin"
	specs "github.com/opencontainers/runtime-spec/specs-go"
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

// bindSubPathStage is where the part of bind mount i (among the bind
// mounts with a subpath= option) is staged.
func bindSubPathStage(static string, i int) string {
	return filepath.Join(static, "volsub", "b"+strconv.Itoa(i))
}

// bindSubPath is the subpath= option of a bind mount (kube play's
// hostPath with a subPath): ok is false without one.
func bindSubPath(mt specs.Mount) (sub string, ok bool) {
	if mt.Type != "bind" && mt.Type != "" {
		return "", false
	}
	for _, o := range mt.Options {
		if v, found := strings.CutPrefix(o, "subpath="); found {
			return v, true
		}
	}
	return "", false
}

// checkBindSubPaths refuses a create's bind mount whose subpath= leads out
// of its source, naming the mount.
func checkBindSubPaths(spec *core.ContainerSpec) error {
	for i, mt := range spec.Mounts {
		if sub, ok := bindSubPath(mt); ok {
			if _, err := core.CleanVolumeSubPath(sub); err != nil {
				return core.InvalidArgument(fmt.Sprintf("mounts[%d].options", i), err)
			}
			if slices.Contains(mt.Options, "O") {
				return core.InvalidArgument(fmt.Sprintf("mounts[%d].options", i), errors.New("subpath and O do not go together"))
			}
		}
	}
	return nil
}

// applyBindSubPaths points spec's bind mounts with subpath= at their
// staging places (in order: N counts them) and drops the option, which
// runc does not know. The places are made now: the spec's bind sources
// must exist.
func applyBindSubPaths(spec *core.ContainerSpec, static string) error {
	n := 0
	for i := range spec.Mounts {
		if _, ok := bindSubPath(spec.Mounts[i]); !ok {
			continue
		}
		if n == 0 {
			spec.Mounts = slices.Clone(spec.Mounts)
		}
		mt := &spec.Mounts[i]
		stage := bindSubPathStage(static, n)
		n++
		if _, err := os.Lstat(stage); err != nil {
			if err := os.MkdirAll(stage, 0o700); err != nil {
				return err
			}
		}
		mt.Source = stage
		mt.Options = slices.DeleteFunc(slices.Clone(mt.Options), func(o string) bool { return strings.HasPrefix(o, "subpath=") })
	}
	return nil
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
	var binds []mountedVolume
	for _, mt := range rec.Spec.Mounts {
		if sub, ok := bindSubPath(mt); ok {
			clean, _ := core.CleanVolumeSubPath(sub)
			binds = append(binds, mountedVolume{Source: mt.Source, SubPath: clean, Dest: mt.Destination})
		}
	}
	if len(binds) == 0 && !slices.ContainsFunc(rec.Volumes, func(v mountedVolume) bool { return v.SubPath != "" }) {
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
		if err := stageSubPath("volume "+v.Name, v, subPathStage(rec.StaticDir, i)); err != nil {
			return err
		}
	}
	for i, b := range binds {
		if err := stageSubPath(b.Source, b, bindSubPathStage(rec.StaticDir, i)); err != nil {
			return err
		}
	}
	return nil
}

// stageSubPath binds the part of one volume (or bind mount source), what
// in messages, at stage.
func stageSubPath(what string, v mountedVolume, stage string) error {
	f, err := securejoin.OpenInRoot(v.Source, v.SubPath)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
			field := "mounts"
			if strings.HasPrefix(what, "volume ") {
				field = "volumes"
			}
			return core.InvalidArgument(field, fmt.Errorf("%s has no %s to mount at %s", what, v.SubPath, v.Dest))
		}
		return fmt.Errorf("%s: open %s: %w", what, v.SubPath, err)
	}
	defer f.Close()
	fd := int(f.Fd())
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("%s: %s: %w", what, v.SubPath, err)
	}
	if err := os.MkdirAll(filepath.Dir(stage), 0o700); err != nil {
		return err
	}
	// An earlier run may have staged the other kind (a directory that is a
	// file now): the place is made anew, empty, for the bind to cover.
	if err := os.Remove(stage); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s: staging place: %w", what, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		err = os.Mkdir(stage, 0o700)
	} else {
		err = os.WriteFile(stage, nil, 0o600)
	}
	if err != nil {
		return fmt.Errorf("%s: staging place: %w", what, err)
	}
	if err := unix.Mount("/proc/self/fd/"+strconv.Itoa(fd), stage, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("%s: bind %s: %w", what, v.SubPath, err)
	}
	return nil
}

// unstageSubPaths detaches every staged volume part of a container.
func unstageSubPaths(static string) { unmountPerRunDir(static, "volsub", false) }
