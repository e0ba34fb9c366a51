package containers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/containers/storage"
	"github.com/containers/storage/pkg/archive"

	"github.com/berth-project/berth/engine/internal/backend/lifecycle/checkpointarchive"
	"github.com/berth-project/berth/engine/internal/backend/platform/sizelimit"
	"github.com/berth-project/berth/engine/internal/core"
)

// importPrefix names the directories imports unpack archives into, under
// the storage root (the same filesystem as the containers' directories, so
// the checkpoint moves into place with a rename). An engine killed during
// an import leaves one behind; Open removes them.
const importPrefix = "checkpoint-import-"

// removeStaleImports removes what imports interrupted by a crash left.
func (m *Manager) removeStaleImports() {
	stale, _ := filepath.Glob(filepath.Join(m.store.GraphRoot(), importPrefix+"*"))
	for _, dir := range stale {
		os.RemoveAll(dir)
	}
}

// layerDiff writes the changes of the container's layer as an uncompressed
// layer diff (deletions as whiteouts).
func (m *Manager) layerDiff(id string, w io.Writer) error {
	sc, err := m.store.Container(id)
	if err != nil {
		return err
	}
	uncompressed := archive.Uncompressed
	rc, err := m.store.Diff("", sc.LayerID, &storage.DiffOptions{Compression: &uncompressed})
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = io.Copy(w, rc)
	return err
}

// Import creates a container from a checkpoint archive (see
// checkpointarchive) and restores it. Nothing of it stays when any step
// fails.
func (m *Manager) Import(ctx context.Context, r io.Reader, opts core.RestoreOptions) (core.RestoreReport, error) {
	ctx = context.WithoutCancel(ctx)
	var report core.RestoreReport
	tmp, err := os.MkdirTemp(m.store.GraphRoot(), importPrefix)
	if err != nil {
		return report, err
	}
	defer os.RemoveAll(tmp)
	a, err := checkpointarchive.Read(ctx, r, tmp, sizelimit.New(m.maxImportSize, "checkpoint archive"))
	if err != nil {
		return report, err
	}
	spec, err := importSpec(a.Config, opts)
	if err != nil {
		return report, err
	}
	var made []string
	id, _, err := m.create(ctx, spec, func(r *record, madeVolumes []string) {
		r.Importing = true
		r.ImportVolumes = madeVolumes
		made = madeVolumes
	})
	if err != nil {
		return report, err
	}
	report, err = m.restoreImported(ctx, id, a, opts)
	if err != nil {
		if rerr := m.Remove(ctx, id, core.RemoveContainerOptions{Force: true, Volumes: true}); rerr != nil {
			m.logger.Warn("remove the container of a failed import", "container", id, "err", rerr)
		} else {
			m.dropVolumes(ctx, id, made)
		}
		return report, err
	}
	return report, nil
}

// importSpec is the spec the imported container is created with: the
// checkpointed one's, renamed, republished and placed into a pod as asked.
func importSpec(cfg checkpointarchive.Config, opts core.RestoreOptions) (core.ContainerSpec, error) {
	spec := cfg.Spec
	spec.Name = cfg.Name
	if opts.Name != "" {
		spec.Name = opts.Name
	}
	if spec.Image == "" {
		spec.Image = cfg.Image
	}
	if opts.PublishPorts != nil {
		spec.PortMappings = opts.PublishPorts
	}
	if spec.PodInfra {
		return spec, core.InvalidArgument("import", errors.New("the archive holds a pod's infra container, which is not restored on its own"))
	}
	switch {
	case spec.Pod != "" && opts.Pod == "":
		return spec, core.InvalidArgument("pod", fmt.Errorf("container %s was checkpointed in a pod: name the pod to restore it into", cfg.Name))
	case spec.Pod == "" && opts.Pod != "":
		return spec, core.InvalidArgument("pod", fmt.Errorf("container %s was not checkpointed in a pod and cannot be restored into one", cfg.Name))
	case opts.Pod != "":
		spec.Pod = opts.Pod
	}
	if opts.IgnoreStaticIP || opts.IgnoreStaticMAC {
		nets := make(map[string]core.PerNetworkOptions, len(spec.Networks))
		for name, n := range spec.Networks {
			if opts.IgnoreStaticIP {
				n.StaticIPs = nil
			}
			if opts.IgnoreStaticMAC {
				n.StaticMAC = nil
			}
			nets[name] = n
		}
		spec.Networks = nets
	}
	return spec, nil
}

// restoreImported fills the new container id from the archive (layer
// changes, volumes, the checkpoint) and restores it.
func (m *Manager) restoreImported(ctx context.Context, id string, a *checkpointarchive.Archive, opts core.RestoreOptions) (core.RestoreReport, error) {
	var report core.RestoreReport
	e, err := m.lookup(id)
	if err != nil {
		return report, err
	}
	e.op.Lock()
	defer e.op.Unlock()
	rec := m.snapshot(e)
	if diff := a.RootfsDiffPath(); diff != "" && !opts.IgnoreRootFS {
		if err := m.applyLayerDiff(rec, diff); err != nil {
			return report, core.InvalidArgument("import", fmt.Errorf("entry %q: %w", checkpointarchive.RootfsDiff, err))
		}
	}
	if !opts.IgnoreVolumes {
		for i, v := range a.Config.Volumes {
			path := a.VolumePath(i)
			if path == "" {
				continue
			}
			if err := m.importVolume(ctx, rec, v.Dest, path); err != nil {
				return report, err
			}
		}
	}
	if err := os.MkdirAll(rec.StaticDir, 0o700); err != nil {
		return report, err
	}
	dir := checkpointDir(rec)
	if err := os.Rename(a.CheckpointPath(), dir); err != nil {
		return report, err
	}
	if err := m.update(ctx, e, func(r *record) {
		r.Importing = false
		r.ImportVolumes = nil
		r.Checkpointed = true
		r.CheckpointedAt = a.Config.CheckpointedAt
		r.CheckpointPath = dir
		r.CheckpointNets = a.Config.Networks
	}); err != nil {
		return report, err
	}
	return m.restoreLocked(ctx, e, opts)
}

// applyLayerDiff applies a layer diff to the container's layer.
func (m *Manager) applyLayerDiff(rec record, path string) error {
	sc, err := m.store.Container(rec.ID)
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = m.store.ApplyDiff(sc.LayerID, f)
	return err
}

// importVolume fills the volume the container mounts at dest with the tar
// at path.
func (m *Manager) importVolume(ctx context.Context, rec record, dest, path string) error {
	if m.volumes == nil {
		return core.InvalidArgument("ignoreVolumes", errors.New("this engine has no volumes: restore with ignoreVolumes"))
	}
	for _, v := range rec.Volumes {
		if v.Dest != dest {
			continue
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := m.volumes.Import(ctx, v.Name, f); err != nil {
			return fmt.Errorf("volume %s: %w", v.Name, err)
		}
		return nil
	}
	return core.InvalidArgument("import", fmt.Errorf("the archive has the content of a volume at %s, which the container does not mount", dest))
}
