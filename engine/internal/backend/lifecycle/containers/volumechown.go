package containers

import (
	"fmt"
	"os"
	"slices"
	"syscall"

	"github.com/containers/common/pkg/chown"

	"github.com/berth-project/berth/engine/internal/core"
)

// The U option of a bind mount or a volume (podman run -v SRC:DST:U,
// --mount ...,U): at each start the source becomes the container's user's,
// by the host IDs that user has through the container's user namespace,
// recursively, as Podman does; a source whose top is theirs already is left
// as it is. containers/common refuses the host paths that must never be
// given away (/, /etc, /usr, a home ...): a 400 naming the mount.

// chownSources changes the owner of the sources rec mounts with U. The
// volumes are mounted and their parts staged already.
func chownSources(rec *record) error {
	type source struct{ field, path string }
	var sources []source
	for i, mt := range rec.Spec.Mounts {
		if (mt.Type == "bind" || mt.Type == "") && slices.Contains(mt.Options, "U") {
			sources = append(sources, source{fmt.Sprintf("mounts[%d]", i), mt.Source})
		}
	}
	for i, v := range rec.Volumes {
		if !slices.Contains(v.Options, "U") {
			continue
		}
		path := v.Source
		if v.SubPath != "" {
			path = subPathStage(rec.StaticDir, i)
		}
		sources = append(sources, source{fmt.Sprintf("volumes[%d]", i), path})
	}
	if len(sources) == 0 {
		return nil
	}
	uid, gid, err := processUser(rec.Bundle)
	if err != nil {
		return err
	}
	hostUID, hostGID := hostID(rec.UIDMap, uid), hostID(rec.GIDMap, gid)
	for _, s := range sources {
		fi, err := os.Stat(s.path)
		if err != nil {
			return core.InvalidArgument(s.field, err)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == hostUID && int(st.Gid) == hostGID {
			continue
		}
		if err := chown.ChangeHostPathOwnership(s.path, true, hostUID, hostGID); err != nil {
			return core.InvalidArgument(s.field, fmt.Errorf("option U: %w", err))
		}
	}
	return nil
}

// processUser is the user and group the container's process runs as, from
// its OCI spec.
func processUser(bundle string) (uid, gid int, err error) {
	spec, err := readBundleSpec(bundle)
	if err != nil || spec.Process == nil {
		return 0, 0, err
	}
	return int(spec.Process.User.UID), int(spec.Process.User.GID), nil
}
