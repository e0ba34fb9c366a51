package containers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/containers/storage/pkg/archive"
	securejoin "github.com/cyphar/filepath-securejoin"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/core"
)

var _ core.VolumeUsers = (*Manager)(nil)

// mountedVolume is one volume a container mounts.
type mountedVolume struct {
	Name      string   `json:"Name"`
	Dest      string   `json:"Dest"`
	Source    string   `json:"Source"`
	Options   []string `json:"Options,omitempty"`
	Anonymous bool     `json:"Anonymous,omitempty"`
	// SubPath is the part of the volume mounted (relative to its root;
	// empty: all of it); see volumesubpath.go.
	SubPath string `json:"SubPath,omitempty"`
	// copyUp: the volume is new and gets the image's content at Dest.
	copyUp bool
}

// resolveVolumes turns the request's volumes and the image's volumes into
// mounted volumes, creating anonymous volumes and named ones that do not
// exist yet. created lists the volumes it created (to undo on failure).
func (m *Manager) resolveVolumes(ctx context.Context, id string, spec *core.ContainerSpec, img *core.Image) (out []mountedVolume, created []string, err error) {
	defer func() {
		if err != nil {
			m.dropVolumes(ctx, id, created)
			created = nil
		}
	}()
	taken := map[string]bool{}
	for _, mt := range spec.Mounts {
		taken[filepath.Clean(mt.Destination)] = true
	}
	wants := slices.Clone(spec.Volumes)
	switch spec.ImageVolumeMode {
	case "", "anonymous", "bind":
	case "tmpfs", "ignore":
	default:
		return nil, nil, core.InvalidArgument("image_volume_mode", fmt.Errorf("%q is not anonymous, tmpfs or ignore", spec.ImageVolumeMode))
	}
	for i, v := range wants {
		field := fmt.Sprintf("volumes[%d]", i)
		if v.Dest == "" || !filepath.IsAbs(v.Dest) || filepath.Clean(v.Dest) == "/" {
			return nil, nil, core.InvalidArgument(field+".Dest", fmt.Errorf("%q must be an absolute path other than /", v.Dest))
		}
		dest := filepath.Clean(v.Dest)
		if taken[dest] {
			return nil, nil, core.InvalidArgument(field+".Dest", fmt.Errorf("duplicate mount destination %s", dest))
		}
		taken[dest] = true
		wants[i].Dest = dest
	}
	if err := m.volumesFrom(spec, &wants, taken); err != nil {
		return nil, nil, err
	}
	if img != nil && spec.ImageVolumeMode != "ignore" {
		dests := make([]string, 0, len(img.Config.Config.Volumes))
		for d := range img.Config.Config.Volumes {
			dests = append(dests, filepath.Clean(d))
		}
		sort.Strings(dests)
		for _, d := range dests {
			if taken[d] || d == "/" || !filepath.IsAbs(d) {
				continue
			}
			taken[d] = true
			if spec.ImageVolumeMode == "tmpfs" {
				spec.Mounts = append(spec.Mounts, specs.Mount{Destination: d, Type: "tmpfs"})
				continue
			}
			wants = append(wants, core.NamedVolume{Dest: d, IsAnonymous: true})
		}
	}
	if len(wants) > 0 && m.volumes == nil {
		return nil, nil, core.InvalidArgument("volumes", errors.New("this engine has no volume backend"))
	}
	for i, w := range wants {
		var opts []string
		noCopy := false
		for _, o := range w.Options {
			switch o {
			case "nocopy":
				noCopy = true
			case "copy":
			default:
				opts = append(opts, o)
			}
		}
		var vol *core.Volume
		if w.Name == "" {
			vol, err = m.volumes.Create(ctx, core.VolumeCreateOptions{Anonymous: true, OnCreate: func(name string) { m.reserveVolume(name, id) }})
			if err != nil {
				return nil, created, err
			}
			created = append(created, vol.Name)
		} else {
			m.reserveVolume(w.Name, id)
			vol, err = m.volumes.Inspect(ctx, w.Name)
			if errors.Is(err, core.ErrNoSuchVolume) {
				vol, err = m.volumes.Create(ctx, core.VolumeCreateOptions{Name: w.Name, Anonymous: w.IsAnonymous})
				if errors.Is(err, core.ErrNameInUse) {
					vol, err = m.volumes.Inspect(ctx, w.Name)
				} else if err == nil {
					created = append(created, vol.Name)
				}
			}
			if err != nil {
				var fe *core.FieldError
				if errors.As(err, &fe) {
					return nil, created, core.InvalidArgument(fmt.Sprintf("volumes[%d].Name", i), fe.Err)
				}
				return nil, created, err
			}
		}
		var sub string
		if w.SubPath != "" {
			if sub, err = core.CleanVolumeSubPath(w.SubPath); err != nil {
				return nil, created, core.InvalidArgument(fmt.Sprintf("volumes[%d].SubPath", i), err)
			}
		}
		// A part of a volume gets no copy of the image's content: that
		// goes to a volume's root, on its first use as a whole.
		out = append(out, mountedVolume{
			Name: vol.Name, Dest: w.Dest, Source: vol.Mountpoint, Options: opts,
			Anonymous: vol.Anonymous, SubPath: sub, copyUp: vol.NeedsCopyUp && !noCopy && sub == "",
		})
	}
	return out, created, nil
}

// volumesFrom adds the volumes and bind mounts of the containers named in
// spec.VolumesFrom, with their options (ro or rw replace the original's).
func (m *Manager) volumesFrom(spec *core.ContainerSpec, wants *[]core.NamedVolume, taken map[string]bool) error {
	for i, from := range spec.VolumesFrom {
		field := fmt.Sprintf("volumes_from[%d]", i)
		name, optText, _ := strings.Cut(from, ":")
		var mode string
		var extra []string
		if optText != "" {
			for _, o := range strings.Split(optText, ",") {
				switch o {
				case "ro", "rw":
					if mode != "" && mode != o {
						return core.InvalidArgument(field, errors.New("ro and rw exclude each other"))
					}
					mode = o
				case "z", "Z":
					extra = append(extra, o)
				default:
					return core.InvalidArgument(field, fmt.Errorf("unknown option %q (ro, rw, z)", o))
				}
			}
		}
		e, err := m.lookup(name)
		if err != nil {
			return err
		}
		src := m.snapshot(e)
		withMode := func(opts []string) []string {
			out := slices.DeleteFunc(slices.Clone(opts), func(o string) bool { return mode != "" && (o == "ro" || o == "rw") })
			if mode != "" {
				out = append(out, mode)
			}
			return append(out, extra...)
		}
		for _, v := range src.Volumes {
			if taken[v.Dest] {
				continue
			}
			taken[v.Dest] = true
			*wants = append(*wants, core.NamedVolume{Name: v.Name, Dest: v.Dest, Options: withMode(v.Options), SubPath: v.SubPath})
		}
		for _, mt := range src.Spec.Mounts {
			dest := filepath.Clean(mt.Destination)
			if (mt.Type != "bind" && mt.Type != "") || taken[dest] {
				continue
			}
			taken[dest] = true
			mt.Options = withMode(mt.Options)
			spec.Mounts = append(spec.Mounts, mt)
		}
	}
	return nil
}

// dropVolumes removes volumes the failed create of container id made.
func (m *Manager) dropVolumes(ctx context.Context, id string, names []string) {
	m.releaseVolumes(id)
	for _, n := range names {
		if err := m.volumes.Remove(ctx, n, false); err != nil && !errors.Is(err, core.ErrNoSuchVolume) {
			m.logger.Warn("remove volume", "volume", n, "err", err)
		}
	}
}

// volumeBinds returns spec with the container's volumes added as bind
// mounts; a part of a volume is bound from where stageSubPaths puts it
// below static.
func volumeBinds(spec core.ContainerSpec, vols []mountedVolume, static string) core.ContainerSpec {
	if len(vols) == 0 {
		return spec
	}
	spec.Mounts = slices.Clone(spec.Mounts)
	for i, v := range vols {
		src := v.Source
		if v.SubPath != "" {
			src = subPathStage(static, i)
		}
		spec.Mounts = append(spec.Mounts, specs.Mount{Destination: v.Dest, Type: "bind", Source: src, Options: v.Options})
	}
	return spec
}

// copyUp fills new volumes with what the image has at their destination,
// as Podman does on a volume's first use.
func (m *Manager) copyUp(ctx context.Context, rootfs string, vols []mountedVolume, rootUID, rootGID int) error {
	for _, v := range vols {
		if !v.copyUp {
			continue
		}
		if rootUID != 0 || rootGID != 0 {
			// A new volume belongs to the container's root, who in a
			// user namespace is an unprivileged host ID (as Podman does).
			if err := os.Lchown(v.Source, rootUID, rootGID); err != nil {
				return fmt.Errorf("volume %s: %w", v.Name, err)
			}
		}
		src, err := securejoin.SecureJoin(rootfs, v.Dest)
		if err != nil {
			return fmt.Errorf("volume %s: %w", v.Name, err)
		}
		fi, err := os.Stat(src)
		if err == nil && fi.IsDir() {
			entries, err := os.ReadDir(v.Source)
			if err != nil {
				return fmt.Errorf("volume %s: %w", v.Name, err)
			}
			if len(entries) == 0 {
				if err := archive.NewDefaultArchiver().CopyWithTar(src, v.Source); err != nil {
					return fmt.Errorf("copy image content into volume %s: %w", v.Name, err)
				}
			}
		}
		if err := m.volumes.MarkCopiedUp(ctx, v.Name); err != nil {
			return err
		}
	}
	return nil
}

// removeAnonymousVolumes removes a removed container's anonymous volumes
// (a volume another container still uses stays).
func (m *Manager) removeAnonymousVolumes(ctx context.Context, rec record) {
	if m.volumes == nil {
		return
	}
	for _, v := range rec.Volumes {
		if !v.Anonymous {
			continue
		}
		err := m.volumes.Remove(ctx, v.Name, false)
		if err != nil && !errors.Is(err, core.ErrNoSuchVolume) {
			m.logger.Warn("remove anonymous volume", "container", rec.ID, "volume", v.Name, "err", err)
		}
	}
}

// reserveVolume counts a volume as used by a container that is being
// created, until releaseVolumes(id).
func (m *Manager) reserveVolume(name, id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !slices.Contains(m.creating[name], id) {
		m.creating[name] = append(m.creating[name], id)
	}
}

// releaseVolumes drops the reservations of a container's creation (its
// record, once added, counts instead).
func (m *Manager) releaseVolumes(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, ids := range m.creating {
		ids = slices.DeleteFunc(ids, func(s string) bool { return s == id })
		if len(ids) == 0 {
			delete(m.creating, name)
		} else {
			m.creating[name] = ids
		}
	}
}

// ContainersUsingVolume returns the IDs of the containers mounting a volume,
// including containers being created with it.
func (m *Manager) ContainersUsingVolume(ctx context.Context, name string) ([]string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	ids := slices.Clone(m.creating[name])
	for id, e := range m.byID {
		for _, v := range e.rec.Volumes {
			if v.Name == name && !slices.Contains(ids, id) {
				ids = append(ids, id)
				break
			}
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// mountVolumes mounts the volumes of rec that have mount options, before
// the container starts.
func (m *Manager) mountVolumes(ctx context.Context, rec *record) error {
	if m.volumes == nil {
		return nil
	}
	for _, v := range rec.Volumes {
		if err := m.volumes.Mount(ctx, v.Name); err != nil {
			return err
		}
	}
	return stageSubPaths(rec)
}

// unmountVolumes unmounts the volumes of rec that no other container in
// the runtime (created, running or paused) still uses.
func (m *Manager) unmountVolumes(ctx context.Context, rec *record) {
	if m.volumes == nil {
		return
	}
	unmountOverlays(rec.StaticDir)
	unstageSubPaths(rec.StaticDir)
	for _, v := range rec.Volumes {
		if m.volumeActive(v.Name, rec.ID) {
			continue
		}
		if err := m.volumes.Unmount(ctx, v.Name); err != nil {
			m.logger.Warn("unmount volume", "volume", v.Name, "err", err)
		}
	}
}

// volumeActive reports whether a container other than except, in the
// runtime now, mounts the volume.
func (m *Manager) volumeActive(name, except string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for id, e := range m.byID {
		if id == except {
			continue
		}
		switch e.rec.State {
		case core.StateCreated, core.StateRunning, core.StatePaused:
		default:
			continue
		}
		for _, v := range e.rec.Volumes {
			if v.Name == name {
				return true
			}
		}
	}
	return false
}
