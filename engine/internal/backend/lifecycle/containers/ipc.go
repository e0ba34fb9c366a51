package containers

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/berth-project/berth/engine/internal/backend/execution/oci"
	"github.com/berth-project/berth/engine/internal/core"
)

// IPC namespaces that others join. A shareable container (the default, as
// with Podman; Docker's API asks for private unless told otherwise) has its
// /dev/shm on the host side: a tmpfs the engine mounts at STATICDIR/shm
// when it starts, binds into it, and unmounts when it exits. A container
// created with ipcns container:ID joins that container's IPC namespace and
// binds the same tmpfs, so System V IPC, message queues and POSIX shared
// memory are one for both; pod members sharing IPC bind their infra
// container's. A private container's /dev/shm is a tmpfs inside it alone.
// The donor is the joiner's dependency (depends.go): starting the joiner
// starts it.

// shmDir is where a container's shareable /dev/shm is mounted on the host.
func shmDir(static string) string { return filepath.Join(static, "shm") }

// sharesPodIPC reports whether rec joins its pod infra container's IPC
// namespace.
func sharesPodIPC(rec *record) bool {
	return rec.PodJoin.InfraID != "" && slices.Contains(rec.PodJoin.Shared, core.PodShareIPC)
}

// ownsShm reports whether rec mounts a /dev/shm of its own on the host: a
// shareable IPC namespace that is not its pod's.
func ownsShm(rec *record) bool {
	return rec.Spec.SharesIPC() && !sharesPodIPC(rec)
}

// resolveIPCNS checks an ipcns container:NAME request at create: NAME must
// be a container whose IPC namespace can be joined; it is recorded by ID.
func (m *Manager) resolveIPCNS(spec *core.ContainerSpec) error {
	ns := &spec.IpcNS
	if ns.NSMode != core.IPCNSContainer {
		return nil
	}
	t, err := m.lookupDonor("ipcns", ns.Value)
	if err != nil {
		return err
	}
	if !t.Spec.SharesIPC() {
		return core.InvalidArgument("ipcns", fmt.Errorf("container %s has a non-shareable IPC namespace (%s): create it with --ipc shareable to join it", t.Name, nsModeString(t.Spec.IpcNS, core.IPCNSShareable)))
	}
	ns.Value = t.ID
	return nil
}

// ipcDonor returns the container whose IPC namespace rec joins (ipcns
// container:ID), or nil.
func (m *Manager) ipcDonor(rec *record) (*entry, error) {
	if rec.Spec.IpcNS.NSMode != core.IPCNSContainer {
		return nil, nil
	}
	e, err := m.lookup(rec.Spec.IpcNS.Value)
	if err != nil {
		return nil, fmt.Errorf("container %s joins the IPC namespace of %s, which is gone: %w", rec.Name, rec.Spec.IpcNS.Value, core.ErrStateConflict)
	}
	return e, nil
}

// shmSource returns the host directory bound at rec's /dev/shm ("" for a
// tmpfs of its own, or none) and adds to joins the IPC namespace rec joins
// by ipcns container:ID. While that container does not run (at create)
// nothing is joined: its start prepares the spec again.
func (m *Manager) shmSource(rec *record, infra *record, joins map[specs.LinuxNamespaceType]string) (string, map[specs.LinuxNamespaceType]string, error) {
	switch {
	case sharesPodIPC(rec):
		if infra == nil || !ownsShm(infra) {
			return "", joins, nil
		}
		return shmDir(infra.StaticDir), joins, nil
	case ownsShm(rec):
		return shmDir(rec.StaticDir), joins, nil
	}
	e, err := m.ipcDonor(rec)
	if e == nil {
		return "", joins, err
	}
	donor := m.snapshot(e)
	if (donor.State != core.StateRunning && donor.State != core.StatePaused) || donor.PID <= 0 {
		return "", joins, nil
	}
	if joins == nil {
		joins = map[specs.LinuxNamespaceType]string{}
	}
	joins[specs.IPCNamespace] = filepath.Join("/proc", strconv.Itoa(donor.PID), "ns", "ipc")
	var donorInfra *record
	if sharesPodIPC(&donor) {
		if ie, err := m.lookup(donor.PodJoin.InfraID); err == nil {
			snap := m.snapshot(ie)
			donorInfra = &snap
		}
	}
	dir, joins, err := m.shmSource(&donor, donorInfra, joins)
	return dir, joins, err
}

// mountShm mounts rec's shareable /dev/shm on the host side (a tmpfs of
// the requested size, owned by the container's root), first detaching one
// a killed engine left there.
func mountShm(rec *record) error {
	if !ownsShm(rec) {
		return nil
	}
	dir := shmDir(rec.StaticDir)
	unmountShm(rec.StaticDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	size := int64(oci.DefaultShmSize)
	if rec.Spec.ShmSize != nil {
		if *rec.Spec.ShmSize <= 0 {
			return core.InvalidArgument("shm_size", fmt.Errorf("%d must be positive", *rec.Spec.ShmSize))
		}
		size = *rec.Spec.ShmSize
	}
	uid, gid := hostRoot(rec)
	opts := fmt.Sprintf("mode=1777,size=%d,uid=%d,gid=%d", size, uid, gid)
	if err := unix.Mount("shm", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount the container's /dev/shm at %s: %w", dir, err)
	}
	return nil
}

// unmountShm detaches whatever is mounted at a container's shareable
// /dev/shm (a joiner that still runs keeps its own view of it).
func unmountShm(static string) {
	dir := shmDir(static)
	for range 8 {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			return
		}
	}
}

// shmCheckpointFile is the tar of a checkpointed container's shareable
// /dev/shm in its checkpoint directory: CRIU takes a bind mount from the
// host as external and saves none of its files, so the engine does (and
// the file travels with an exported checkpoint).
const shmCheckpointFile = "devshm.tar"

// saveShm writes the files of rec's shareable /dev/shm to dir.
func saveShm(rec *record, dir string) error {
	if !ownsShm(rec) {
		return nil
	}
	root, err := os.OpenRoot(shmDir(rec.StaticDir))
	if err != nil {
		return err
	}
	defer root.Close()
	f, err := os.OpenFile(filepath.Join(dir, shmCheckpointFile), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || name == "." {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = root.Readlink(name); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return nil // a socket or device: nothing to keep
		}
		hdr.Name = name
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		src, err := root.Open(name)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if cerr := tw.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// restoreShm puts the files saveShm kept back into rec's /dev/shm, which
// mountShm mounted. The tar may come from an imported archive: every entry
// stays inside the directory (os.Root), and one that is not a directory,
// file or symbolic link is refused.
func restoreShm(rec *record, dir string) error {
	f, err := os.Open(filepath.Join(dir, shmCheckpointFile))
	if errors.Is(err, os.ErrNotExist) || !ownsShm(rec) {
		if f != nil {
			f.Close()
		}
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	root, err := os.OpenRoot(shmDir(rec.StaticDir))
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", shmCheckpointFile, err)
		}
		mode := hdr.FileInfo().Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = root.MkdirAll(hdr.Name, mode)
		case tar.TypeReg:
			var out *os.File
			if out, err = root.OpenFile(hdr.Name, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode); err == nil {
				_, err = io.Copy(out, tr)
				if cerr := out.Close(); err == nil {
					err = cerr
				}
			}
		case tar.TypeSymlink:
			err = root.Symlink(hdr.Linkname, hdr.Name)
		default:
			err = fmt.Errorf("entry %q of type %q is not a file, directory or link", hdr.Name, hdr.Typeflag)
		}
		if err == nil {
			err = root.Lchown(hdr.Name, hdr.Uid, hdr.Gid)
		}
		if err == nil && hdr.Typeflag != tar.TypeSymlink {
			err = root.Chmod(hdr.Name, mode)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", shmCheckpointFile, err)
		}
	}
}
