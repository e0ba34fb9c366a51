package containers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	securejoin "github.com/cyphar/filepath-securejoin"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/core"
)

// ArtifactSource gives the files of the artifacts containers mount
// (artifactstore.Store implements it).
type ArtifactSource interface {
	Files(ctx context.Context, nameOrDigest string, opts core.ArtifactExtractOptions) ([]core.ArtifactFile, error)
}

// Artifact volumes (Podman 5's --mount type=artifact): the files of an
// artifact bound read-only from the artifact store's blobs, which are
// named by their digest and must never change. The artifact is looked up
// by name at each start, as Podman does: one removed since is a start
// that fails; a running container keeps the files it has.

// checkArtifactVolumes checks a create's artifact volumes and that each
// names files of an artifact the store has.
func (m *Manager) checkArtifactVolumes(ctx context.Context, spec *core.ContainerSpec) error {
	for i := range spec.ArtifactVolumes {
		av := &spec.ArtifactVolumes[i]
		field := fmt.Sprintf("artifact_volumes[%d]", i)
		switch {
		case m.artifacts == nil:
			return core.InvalidArgument(field, errors.New("this engine has no artifact store"))
		case av.Source == "":
			return core.InvalidArgument(field+".source", errors.New("an artifact is required"))
		case !path.IsAbs(av.Destination) || path.Clean(av.Destination) == "/":
			return core.InvalidArgument(field+".destination", fmt.Errorf("%q is not an absolute path below /", av.Destination))
		case av.Title != "" && av.Digest != "":
			return core.InvalidArgument(field, errors.New("title and digest cannot be combined"))
		case strings.ContainsAny(av.Name, "/\x00") || av.Name == "." || av.Name == "..":
			return core.InvalidArgument(field+".name", fmt.Errorf("%q is not a plain file name", av.Name))
		}
		av.Destination = path.Clean(av.Destination)
		if destinationTaken(spec, av.Destination) {
			return core.InvalidArgument(field+".destination", fmt.Errorf("duplicate mount destination %s", av.Destination))
		}
		if _, err := m.artifacts.Files(ctx, av.Source, core.ArtifactExtractOptions{Title: av.Title, Digest: av.Digest}); err != nil {
			var fe *core.FieldError
			if errors.As(err, &fe) {
				return core.InvalidArgument(field, fe.Err)
			}
			return fmt.Errorf("%s: %w", field, err)
		}
	}
	return nil
}

// artifactBinds are the read-only binds of rec's artifact volumes: at
// DEST/NAME each, or at DEST itself for an artifact of one file where the
// image has no directory at DEST (Podman's rule).
func (m *Manager) artifactBinds(ctx context.Context, rec *record) ([]specs.Mount, error) {
	var out []specs.Mount
	for _, av := range rec.Spec.ArtifactVolumes {
		if m.artifacts == nil {
			return nil, errors.New("this engine has no artifact store")
		}
		files, err := m.artifacts.Files(ctx, av.Source, core.ArtifactExtractOptions{Title: av.Title, Digest: av.Digest})
		if err != nil {
			return nil, fmt.Errorf("artifact volume at %s: %w", av.Destination, err)
		}
		isDir, exists := false, false
		if inRoot, err := securejoin.SecureJoin(rec.Rootfs, av.Destination); err == nil {
			if fi, err := os.Stat(inRoot); err == nil {
				exists, isDir = true, fi.IsDir()
			}
		}
		asFile := exists && !isDir || !exists && len(files) == 1
		if asFile && len(files) > 1 {
			return nil, core.InvalidArgument("artifact_volumes", fmt.Errorf("artifact %s has %d files and %s is a file in the container", av.Source, len(files), av.Destination))
		}
		for i, f := range files {
			dest := av.Destination
			if !asFile {
				name := f.Name
				if av.Name != "" {
					name = av.Name
					if len(files) > 1 {
						name += "-" + strconv.Itoa(i)
					}
				}
				dest = path.Join(av.Destination, name)
			}
			out = append(out, specs.Mount{Destination: dest, Type: "bind", Source: f.Path, Options: []string{"bind", "ro", "nosuid", "nodev"}})
		}
	}
	return out, nil
}
