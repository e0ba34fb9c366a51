package containers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/berth-project/berth/engine/internal/backend/execution/containerfs"
	"github.com/berth-project/berth/engine/internal/backend/execution/oci"
	"github.com/berth-project/berth/engine/internal/backend/platform/ioctx"
	"github.com/berth-project/berth/engine/internal/backend/platform/sizelimit"
	"github.com/berth-project/berth/engine/internal/core"
)

var _ core.ContainerArchives = (*Manager)(nil)

// tempFile creates a temporary file in the engine's tmp directory, named
// so that the next start removes it if a crash leaves it behind (see
// imagestore.NewTransfer).
func (m *Manager) tempFile(pattern string) (*os.File, error) {
	tmp := filepath.Join(filepath.Dir(m.store.GraphRoot()), "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return nil, err
	}
	return os.CreateTemp(tmp, "transfer-"+pattern)
}

// StatPath describes a path in the container.
func (m *Manager) StatPath(ctx context.Context, nameOrID, path string, style core.ArchiveStyle) (core.PathStat, error) {
	if path == "" {
		return core.PathStat{}, core.InvalidArgument("path", errors.New("a path is required"))
	}
	view, _, release, err := m.view(nameOrID)
	if err != nil {
		return core.PathStat{}, err
	}
	defer release()
	if style == core.DockerArchive {
		return view.DockerStat(path)
	}
	return view.Stat(path)
}

// GetArchive writes path as a tar to the writer start returns once the path
// is found.
func (m *Manager) GetArchive(ctx context.Context, nameOrID, path string, style core.ArchiveStyle, start func(core.PathStat) io.Writer) error {
	if path == "" {
		return core.InvalidArgument("path", errors.New("a path is required"))
	}
	view, _, release, err := m.view(nameOrID)
	if err != nil {
		return err
	}
	defer release()
	if style == core.DockerArchive {
		st, err := view.DockerStat(path)
		if err != nil {
			return err
		}
		return view.WriteDockerArchive(path, ioctx.Writer(ctx, start(st)))
	}
	st, err := view.Stat(path)
	if err != nil {
		return err
	}
	return view.WriteArchive(path, ioctx.Writer(ctx, start(st)))
}

// PutArchive extracts an archive into the directory path of the container.
// The archive is read and checked completely (kept in the engine's tmp
// directory) before anything in the container changes.
func (m *Manager) PutArchive(ctx context.Context, nameOrID, path string, archive io.Reader, opts core.PutArchiveOptions) error {
	if path == "" {
		return core.InvalidArgument("path", errors.New("a path is required"))
	}
	if _, err := m.lookup(nameOrID); err != nil {
		return err
	}
	spool, err := m.tempFile("cp-*.tar")
	if err != nil {
		return fmt.Errorf("keeping the archive: %w", err)
	}
	defer os.Remove(spool.Name())
	defer spool.Close()
	// What the archive expands to is bounded (--max-expanded-size) and a
	// decompression bomb refused by its expansion ratio as it streams: the
	// spool of the decompressed archive had no bound before.
	plain, err := sizelimit.New(m.maxImportSize, "archive").Decompress(ctx, archive)
	if err != nil {
		return err
	}
	defer plain.Close()
	if err := containerfs.Receive(plain, spool, opts.Rename); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	view, rec, release, err := m.view(nameOrID)
	if err != nil {
		return err
	}
	defer release()
	put := containerfs.PutOptions{NoOverwriteDirNonDir: opts.NoOverwriteDirNonDir, Rename: opts.Rename}
	if opts.CopyUIDGID {
		user := rec.Spec.User
		if user == "" {
			user = rec.ImageUser
		}
		eu, err := oci.ResolveUser(view.Root, user, nil)
		if err != nil {
			return err
		}
		put.Owner = &containerfs.Owner{UID: eu.Uid, GID: eu.Gid}
	}
	return view.Extract(path, spool, put)
}

// view returns the container's filesystem as the host sees it, and the
// function that releases what it holds. A container with processes is seen
// through /proc/PID/root, with every mount of its mount namespace (tmpfs
// included); any other through its rootfs mount (mounted for the while)
// with its volumes and bind mounts laid over it.
func (m *Manager) view(nameOrID string) (containerfs.View, record, func(), error) {
	e, err := m.lookup(nameOrID)
	if err != nil {
		return containerfs.View{}, record{}, nil, err
	}
	rec := m.snapshot(e)
	workDir := rec.Spec.WorkDir
	if workDir == "" {
		workDir = rec.ImageWorkDir
	}
	if root, closer, ok := liveRoot(rec); ok {
		return containerfs.View{Root: root, WorkDir: workDir}, rec, closer, nil
	}
	rootfs, release, err := m.holdRootfs(e)
	if err != nil {
		return containerfs.View{}, record{}, nil, err
	}
	rec = m.snapshot(e)
	var mounts []containerfs.Mount
	for _, v := range rec.Volumes {
		mounts = append(mounts, containerfs.Mount{Destination: v.Dest, Source: v.Source, ReadOnly: slices.Contains(v.Options, "ro"),
			Unmounted: m.mountedOnUse(v.Name) && !isMountPoint(v.Source)})
	}
	for _, mnt := range rec.Spec.Mounts {
		if mnt.Type == "bind" {
			mounts = append(mounts, containerfs.Mount{Destination: mnt.Destination, Source: mnt.Source, ReadOnly: slices.Contains(mnt.Options, "ro")})
		}
	}
	return containerfs.View{Root: rootfs, Mounts: mounts, WorkDir: workDir, ReadOnly: rec.Spec.ReadOnly}, rec, release, nil
}

// mountedOnUse reports whether a volume has mount options (tmpfs, or a
// bind of a device directory): its content is only there while mounted.
func (m *Manager) mountedOnUse(name string) bool {
	if m.volumes == nil {
		return false
	}
	v, err := m.volumes.Inspect(context.Background(), name)
	return err == nil && len(v.Options) > 0
}

// isMountPoint reports whether something is mounted on dir (its mount
// differs from its parent's).
func isMountPoint(dir string) bool {
	var here, parent unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, dir, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &here) != nil ||
		unix.Statx(unix.AT_FDCWD, filepath.Dir(dir), 0, unix.STATX_MNT_ID, &parent) != nil {
		return false
	}
	return here.Mnt_id != parent.Mnt_id
}

// liveRoot opens the root directory of a container's running (or created,
// or paused) process. The handle is taken before the process is checked
// to be the container's (its cgroup), so a reused PID cannot lend another
// process's root; the root is then named through the handle.
func liveRoot(rec record) (string, func(), bool) {
	live := rec.State == core.StateRunning || rec.State == core.StatePaused || rec.State == core.StateCreated
	if !live || rec.PID <= 0 || rec.CgroupPath == "" {
		return "", nil, false
	}
	pid := strconv.Itoa(rec.PID)
	root, err := os.OpenFile("/proc/"+pid+"/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, false
	}
	cgroups, err := os.ReadFile("/proc/" + pid + "/cgroup")
	if err != nil || !strings.Contains(string(cgroups), rec.CgroupPath) {
		root.Close()
		return "", nil, false
	}
	return "/proc/self/fd/" + strconv.Itoa(int(root.Fd())), func() { root.Close() }, true
}

// holdRootfs mounts the container's rootfs if it is not mounted and holds
// the mount until the returned function is called.
func (m *Manager) holdRootfs(e *entry) (string, func(), error) {
	e.op.Lock()
	defer e.op.Unlock()
	if m.isRemoved(e) {
		return "", nil, core.ErrNoSuchContainer
	}
	rec := m.snapshot(e)
	if rec.State == core.StateRemoving {
		return "", nil, fmt.Errorf("container %s is being removed: %w", rec.Name, core.ErrStateConflict)
	}
	rootfs := rec.Rootfs
	if !rec.Mounted {
		var err error
		if rootfs, err = m.mountRoot(rec.ID, &rec.Spec); err != nil {
			return "", nil, fmt.Errorf("mount container %s: %w", rec.Name, err)
		}
		if err := m.update(context.Background(), e, func(r *record) {
			r.Mounted = true
			r.Rootfs = rootfs
		}); err != nil {
			_ = m.unmountRoot(rec.ID, &rec.Spec)
			return "", nil, err
		}
	}
	m.mu.Lock()
	e.holds++
	if !rec.Mounted {
		e.mountedForCopy = true
	}
	m.mu.Unlock()
	return rootfs, func() { m.releaseRootfs(e) }, nil
}

// releaseRootfs ends one holdRootfs; the last one unmounts a rootfs that a
// copy mounted when nothing else needs it (a client mount, a live container).
func (m *Manager) releaseRootfs(e *entry) {
	e.op.Lock()
	defer e.op.Unlock()
	m.mu.Lock()
	e.holds--
	ours := e.holds == 0 && e.mountedForCopy && !e.removed
	if e.holds == 0 {
		e.mountedForCopy = false
	}
	m.mu.Unlock()
	rec := m.snapshot(e)
	live := rec.State == core.StateRunning || rec.State == core.StatePaused || rec.State == core.StateCreated
	if !ours || !rec.Mounted || rec.UserMounts > 0 || live || rec.NeedsCleanup {
		return
	}
	if err := m.unmountRoot(rec.ID, &rec.Spec); err != nil {
		m.logger.Warn("unmount container after a copy", "container", rec.ID, "err", err)
		return
	}
	_ = m.update(context.Background(), e, func(r *record) {
		r.Mounted = false
		r.Rootfs = ""
	})
}

// copyHeld reports whether the engine holds e's rootfs mount for a copy.
func (m *Manager) copyHeld(e *entry) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return e.holds > 0
}
