package containers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/containers/image/v5/manifest"
	"github.com/containers/storage"
	"github.com/containers/storage/pkg/archive"

	"github.com/berth-project/berth/engine/internal/backend/images/imagestore"
	"github.com/berth-project/berth/engine/internal/core"
)

// ImageCommitter stores images made from a parent image and a layer
// (imagestore.Transfer).
type ImageCommitter interface {
	Commit(ctx context.Context, opts imagestore.CommitOptions) (string, error)
}

var _ core.ContainerCommits = (*Manager)(nil)

// Commit stores the container's writable layer as a new image on top of
// the container's image. The new image's configuration is the image's with
// the container's command, entrypoint, environment, labels, user and
// working directory, then opts.Changes, as Podman commits.
func (m *Manager) Commit(ctx context.Context, nameOrID string, opts core.CommitOptions) (string, error) {
	if m.commits == nil {
		return "", errors.New("committing containers is not configured")
	}
	if opts.Format != "" && opts.Format != imagestore.FormatOCI && opts.Format != imagestore.FormatDocker {
		return "", core.InvalidArgument("format", fmt.Errorf("%q is not oci or docker", opts.Format))
	}
	if err := opts.Config.Check(opts.Format); err != nil {
		return "", err
	}
	e, err := m.lookup(nameOrID)
	if err != nil {
		return "", err
	}
	rec := m.snapshot(e)
	if rec.State == core.StateRemoving {
		return "", fmt.Errorf("container %s is being removed: %w", rec.Name, core.ErrStateConflict)
	}
	if rec.Spec.Rootfs != "" {
		return "", errNoLayers(rec.Name)
	}
	if opts.Pause && rec.State == core.StateRunning {
		if err := m.Pause(ctx, rec.ID); err == nil {
			defer func() {
				if err := m.Unpause(context.WithoutCancel(ctx), rec.ID); err != nil {
					m.logger.Warn("unpause after commit", "container", rec.ID, "err", err)
				}
			}()
		} else if !errors.Is(err, core.ErrStateConflict) {
			return "", fmt.Errorf("pausing %s to commit: %w", rec.Name, err)
		}
	}
	sc, err := m.store.Container(rec.ID)
	if err != nil {
		return "", fmt.Errorf("container %s storage: %w", rec.Name, err)
	}
	diff, err := m.spoolDiff(sc.LayerID)
	if err != nil {
		return "", fmt.Errorf("reading the changes of %s: %w", rec.Name, err)
	}
	defer os.Remove(diff.Name())
	defer diff.Close()
	var names []string
	if opts.Reference != "" {
		names = []string{opts.Reference}
	}
	id, err := m.commits.Commit(ctx, imagestore.CommitOptions{
		Parent: rec.ImageID,
		Layer:  diff,
		Squash: opts.Squash,
		Edit: func(cfg *imagestore.RuntimeConfig) error {
			containerConfig(rec, cfg)
			mergeCommitConfig(cfg, opts.Config)
			return nil
		},
		Changes:   opts.Changes,
		Author:    opts.Author,
		Comment:   opts.Comment,
		CreatedBy: strings.Join(append([]string{rec.Path}, rec.Args...), " "),
		Format:    opts.Format,
		Names:     names,
	})
	if err != nil {
		if errors.Is(err, core.ErrNoSuchImage) {
			return "", fmt.Errorf("the image of container %s is gone: %w", rec.Name, err)
		}
		return "", err
	}
	m.emit(ctx, core.EventCommit, m.snapshot(e), nil)
	return id, nil
}

// containerConfig lays the container's settings over its image's
// configuration.
func containerConfig(rec record, cfg *imagestore.RuntimeConfig) {
	if rec.Spec.Entrypoint != nil {
		cfg.Entrypoint = rec.Spec.Entrypoint
		cfg.Cmd = nil
	}
	if len(rec.Spec.Command) > 0 {
		cfg.Cmd = rec.Spec.Command
	}
	keys := make([]string, 0, len(rec.Spec.Env))
	for k := range rec.Spec.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cfg.Env = setEnvVar(cfg.Env, k, rec.Spec.Env[k])
	}
	if len(rec.Spec.Labels) > 0 && cfg.Labels == nil {
		cfg.Labels = map[string]string{}
	}
	for k, v := range rec.Spec.Labels {
		cfg.Labels[k] = v
	}
	if rec.Spec.User != "" {
		cfg.User = rec.Spec.User
	}
	if rec.Spec.WorkDir != "" {
		cfg.WorkingDir = rec.Spec.WorkDir
	}
}

// mergeCommitConfig lays a commit's configuration over the image's, as
// Podman merges it (see core.CommitConfig).
func mergeCommitConfig(cfg *imagestore.RuntimeConfig, c *core.CommitConfig) {
	if c == nil {
		return
	}
	if c.User != "" {
		cfg.User = c.User
	}
	if c.WorkingDir != "" {
		cfg.WorkingDir = c.WorkingDir
	}
	if c.StopSignal != "" {
		cfg.StopSignal = c.StopSignal
	}
	if len(c.Cmd) > 0 {
		cfg.Cmd = c.Cmd
	}
	if len(c.Entrypoint) > 0 {
		cfg.Entrypoint = c.Entrypoint
	}
	if len(c.Shell) > 0 {
		cfg.Shell = c.Shell
	}
	if len(c.OnBuild) > 0 {
		cfg.OnBuild = c.OnBuild
	}
	if h := c.Healthcheck; h != nil {
		cfg.Healthcheck = &manifest.Schema2HealthConfig{Test: h.Test, StartPeriod: h.StartPeriod, Interval: h.Interval, Timeout: h.Timeout, Retries: h.Retries}
	}
	for _, kv := range c.Env {
		k, v, _ := strings.Cut(kv, "=")
		cfg.Env = setEnvVar(cfg.Env, k, v)
	}
	cfg.Labels = addKeys(cfg.Labels, c.Labels)
	cfg.ExposedPorts = addKeys(cfg.ExposedPorts, c.ExposedPorts)
	cfg.Volumes = addKeys(cfg.Volumes, c.Volumes)
}

// addKeys returns to with the entries of from added.
func addKeys[V any](to, from map[string]V) map[string]V {
	if len(from) == 0 {
		return to
	}
	if to == nil {
		to = make(map[string]V, len(from))
	}
	for k, v := range from {
		to[k] = v
	}
	return to
}

func setEnvVar(env []string, key, value string) []string {
	out := append([]string(nil), env...)
	for i, kv := range out {
		if k, _, _ := strings.Cut(kv, "="); k == key {
			out[i] = key + "=" + value
			return out
		}
	}
	return append(out, key+"="+value)
}

// spoolDiff copies a layer's diff into a temporary file: the store keeps its
// layers locked while a diff is read, and storing the new layer needs them.
func (m *Manager) spoolDiff(layerID string) (*os.File, error) {
	uncompressed := archive.Uncompressed
	rc, err := m.store.Diff("", layerID, &storage.DiffOptions{Compression: &uncompressed})
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	f, err := m.tempFile("commit-*.tar")
	if err != nil {
		return nil, err
	}
	if _, err := io.Copy(f, rc); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return f, nil
}
