package containers

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/berth-project/berth/engine/internal/core"
)

// Overlay mounts (podman run -v SRC:DST:O, on a host directory or a
// volume): the container sees SRC through an overlay whose lower layer is
// SRC, so its writes never reach SRC. The upper layer is the container's
// own, STATICDIR/ovl/N/upper, emptied at each start and when the
// container stops, as Podman discards it; or, with upperdir=U,workdir=W
// (Podman's options), the client's directories, which keep the changes.
// The overlay is mounted per run at STATICDIR/ovl/N/merged, from where the
// runtime binds it; a kill -9 leaves at most mounts below the container's
// directory, which its next start, its cleanup or its removal detaches.

// overlayOption is what the O option of one mount asks for.
type overlayOption struct {
	upper, work string
}

// parseOverlayOption reads the O option and its upperdir= and workdir=
// from a mount's options; ok is false without O.
func parseOverlayOption(options []string) (o overlayOption, ok bool, err error) {
	for _, opt := range options {
		switch {
		case opt == "O":
			ok = true
		case strings.HasPrefix(opt, "upperdir="):
			o.upper = strings.TrimPrefix(opt, "upperdir=")
		case strings.HasPrefix(opt, "workdir="):
			o.work = strings.TrimPrefix(opt, "workdir=")
		}
	}
	switch {
	case !ok && (o.upper != "" || o.work != ""):
		return o, false, errors.New("upperdir and workdir go with the O option")
	case (o.upper == "") != (o.work == ""):
		return o, ok, errors.New("upperdir and workdir go together")
	case o.upper != "" && (!filepath.IsAbs(o.upper) || !filepath.IsAbs(o.work)):
		return o, ok, errors.New("upperdir and workdir must be absolute paths")
	case ok && (slices.Contains(options, "ro") || slices.Contains(options, "U")):
		return o, ok, errors.New("an overlay (O) is writable and keeps its source's owners: ro and U do not go with it")
	}
	return o, ok, nil
}

// overlayDir is where overlay i of a container is mounted.
func overlayDir(static string, i int) string {
	return filepath.Join(static, "ovl", strconv.Itoa(i))
}

// foldOverlayVolumes turns a create's overlay volumes (Podman's form of
// -v /src:/dst:O) into bind mounts with the O option, where the engine
// keeps every overlay.
func foldOverlayVolumes(spec *core.ContainerSpec) error {
	mounts, err := core.FoldOverlayVolumes("overlay_volumes", spec.OverlayVolumes, spec.Mounts)
	if err != nil {
		return err
	}
	spec.Mounts, spec.OverlayVolumes = mounts, nil
	return nil
}

// checkOverlayOptions refuses bad O options of a create's mounts and
// volumes, naming the entry.
func checkOverlayOptions(spec *core.ContainerSpec) error {
	for i, mt := range spec.Mounts {
		if _, ok, err := parseOverlayOption(mt.Options); err != nil {
			return core.InvalidArgument(fmt.Sprintf("mounts[%d].options", i), err)
		} else if ok && mt.Type != "bind" && mt.Type != "" {
			return core.InvalidArgument(fmt.Sprintf("mounts[%d].options", i), fmt.Errorf("the O option is for bind mounts and volumes, not %s", mt.Type))
		}
	}
	for i, v := range spec.Volumes {
		if _, _, err := parseOverlayOption(v.Options); err != nil {
			return core.InvalidArgument(fmt.Sprintf("volumes[%d].Options", i), err)
		}
	}
	return nil
}

// applyOverlays points spec's bind mounts with O at their overlays (in
// order: N counts them) and drops the options runc does not know. The
// directories are made now, as the spec's bind sources must exist.
func applyOverlays(spec *core.ContainerSpec, static string) error {
	// The mounts may share their array with the container's record.
	spec.Mounts = slices.Clone(spec.Mounts)
	n := 0
	for i := range spec.Mounts {
		mt := &spec.Mounts[i]
		if _, ok, _ := parseOverlayOption(mt.Options); !ok {
			continue
		}
		merged := filepath.Join(overlayDir(static, n), "merged")
		if err := os.MkdirAll(merged, 0o755); err != nil {
			return err
		}
		mt.Source = merged
		mt.Options = slices.DeleteFunc(slices.Clone(mt.Options), func(o string) bool {
			return o == "O" || strings.HasPrefix(o, "upperdir=") || strings.HasPrefix(o, "workdir=")
		})
		n++
	}
	return nil
}

// mountOverlays mounts rec's overlays, first detaching what a killed
// engine left there. The volumes are mounted and their parts staged.
func mountOverlays(rec *record) (err error) {
	binds := volumeBinds(rec.Spec, rec.Volumes, rec.StaticDir).Mounts
	if !slices.ContainsFunc(binds, func(mt specs.Mount) bool { _, ok, _ := parseOverlayOption(mt.Options); return ok }) {
		return nil
	}
	unmountOverlays(rec.StaticDir)
	defer func() {
		if err != nil {
			unmountOverlays(rec.StaticDir)
		}
	}()
	rootUID, rootGID := hostRoot(rec)
	n := 0
	for _, mt := range binds {
		o, ok, _ := parseOverlayOption(mt.Options)
		if !ok {
			continue
		}
		dir := overlayDir(rec.StaticDir, n)
		n++
		upper, work := o.upper, o.work
		if upper == "" {
			upper, work = filepath.Join(dir, "upper"), filepath.Join(dir, "work")
			for _, d := range []string{upper, work} {
				if err := os.RemoveAll(d); err != nil {
					return err
				}
				if err := os.MkdirAll(d, 0o755); err != nil {
					return err
				}
				// Writable by the container's root, who in a user
				// namespace is an unprivileged host ID.
				if err := os.Chown(d, rootUID, rootGID); err != nil {
					return err
				}
			}
		} else {
			for _, d := range []string{upper, work} {
				if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
					return core.InvalidArgument("mounts", fmt.Errorf("overlay at %s: %s is not a directory", mt.Destination, d))
				}
			}
		}
		merged := filepath.Join(dir, "merged")
		if err := os.MkdirAll(merged, 0o755); err != nil {
			return err
		}
		opts := "lowerdir=" + mt.Source + ",upperdir=" + upper + ",workdir=" + work
		if strings.ContainsAny(mt.Source+upper+work, ",:") {
			return core.InvalidArgument("mounts", fmt.Errorf("overlay at %s: paths with , or : cannot be overlay layers", mt.Destination))
		}
		if err := unix.Mount("overlay", merged, "overlay", unix.MS_NODEV|unix.MS_NOSUID, opts); err != nil {
			return fmt.Errorf("overlay at %s of %s: %w", mt.Destination, mt.Source, err)
		}
	}
	return nil
}

// unmountOverlays detaches a container's overlays and drops the upper
// layers the engine made for them.
func unmountOverlays(static string) { unmountPerRunDir(static, "ovl", true) }
