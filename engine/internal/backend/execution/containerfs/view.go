// Package containerfs copies files in and out of a container's filesystem
// (podman cp). A View maps container paths to directories on the host: the
// container's root filesystem (its mount point, or /proc/PID/root of a
// running container, which shows every mount of the container's mount
// namespace) and, for a container that does not run, the sources of its
// volumes and bind mounts. Every lookup goes through
// github.com/cyphar/filepath-securejoin inside one of those directories and
// every file operation through directory handles, so neither a symbolic link
// nor ".." (in a path or in an archive) can reach the rest of the host.
package containerfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	securejoin "github.com/cyphar/filepath-securejoin"
	"golang.org/x/sys/unix"

	"github.com/berth-project/berth/engine/internal/core"
)

// Mount is a host directory or file that a stopped container would see at
// Destination (a volume or a bind mount).
type Mount struct {
	Destination string
	Source      string
	// ReadOnly refuses writes below Destination.
	ReadOnly bool
	// Unmounted marks a volume that exists only while mounted (tmpfs, or a
	// bind of another directory) and is not mounted now: paths below
	// Destination are refused, as Podman refuses them.
	Unmounted bool
}

// View is a container's filesystem as seen from the host.
type View struct {
	// Root is the host directory of the container's "/".
	Root string
	// Mounts are shown over Root. Leave it empty when Root already shows the
	// container's mounts (/proc/PID/root).
	Mounts []Mount
	// WorkDir is what relative paths are relative to ("/" when empty).
	WorkDir string
	// ReadOnly refuses writes to Root (a read-only root filesystem).
	ReadOnly bool
}

// place is where a container path lives on the host.
type place struct {
	// root is the host directory lookups stay inside.
	root string
	// dest is the container path that root shows.
	dest string
	// rel is the path below root, not yet resolved.
	rel string
	// file is the destination of a file mount, which rel names in root.
	file string
	// readOnly is set for a read-only mount or root filesystem.
	readOnly bool
}

// absolute makes p absolute (relative to the working directory) and clean.
func (v View) absolute(p string) string {
	if !path.IsAbs(p) {
		wd := v.WorkDir
		if wd == "" {
			wd = "/"
		}
		p = path.Join("/", wd, p)
	}
	return path.Clean(p)
}

// locate finds the tree a clean absolute container path lives in: the mount
// with the longest destination that holds it, else the root filesystem.
func (v View) locate(abs string) (place, error) {
	mounts := append([]Mount(nil), v.Mounts...)
	sort.SliceStable(mounts, func(i, j int) bool { return len(mounts[i].Destination) > len(mounts[j].Destination) })
	for _, m := range mounts {
		dest := path.Clean("/" + m.Destination)
		if abs != dest && !strings.HasPrefix(abs, dest+"/") && dest != "/" {
			continue
		}
		if m.Unmounted {
			return place{}, fmt.Errorf("the volume at %s is not mounted while the container does not run, cannot copy into or out of it: %w", dest, core.ErrStateConflict)
		}
		fi, err := os.Stat(m.Source)
		if err != nil {
			return place{}, fmt.Errorf("mount source %s of %s: %w", m.Source, dest, err)
		}
		if fi.IsDir() {
			return place{root: m.Source, dest: dest, rel: "/" + strings.TrimPrefix(strings.TrimPrefix(abs, dest), "/"), readOnly: m.ReadOnly}, nil
		}
		// A file mount: only the file itself is below its destination.
		if abs != dest {
			return place{}, fmt.Errorf("%s: %w (%s is a file)", abs, core.ErrNoSuchPath, dest)
		}
		return place{root: filepath.Dir(m.Source), dest: path.Dir(dest), rel: filepath.Base(m.Source), file: dest, readOnly: m.ReadOnly}, nil
	}
	return place{root: v.Root, dest: "/", rel: abs, readOnly: v.ReadOnly}, nil
}

// resolvedPath is a path found in a view.
type resolvedPath struct {
	// handle is an O_PATH handle of the file.
	handle *os.File
	place  place
	// cpath is the resolved container path; inRoot the same below place.root.
	cpath, inRoot string
}

// open resolves p (following symbolic links, inside its tree) and returns
// an O_PATH handle with where it was found.
func (v View) open(p string) (resolvedPath, error) {
	pl, err := v.locate(v.absolute(p))
	if err != nil {
		return resolvedPath{}, err
	}
	joined, err := securejoin.SecureJoin(pl.root, pl.rel)
	if err != nil {
		return resolvedPath{}, fmt.Errorf("resolving %s: %w", p, err)
	}
	inRoot := "/" + strings.TrimPrefix(strings.TrimPrefix(joined, filepath.Clean(pl.root)), "/")
	cpath := path.Join(pl.dest, inRoot)
	if pl.file != "" {
		cpath = pl.file
	}
	h, err := securejoin.OpenInRoot(pl.root, pl.rel)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
			return resolvedPath{}, fmt.Errorf("%s: %w", p, core.ErrNoSuchPath)
		}
		return resolvedPath{}, fmt.Errorf("opening %s: %w", p, err)
	}
	return resolvedPath{handle: h, place: pl, cpath: cpath, inRoot: inRoot}, nil
}

// finalSymlink is a path's last component that is a symbolic link.
type finalSymlink struct {
	st   unix.Stat_t
	text string
	// resolved is the container path it leads to (which need not exist).
	resolved string
}

// finalLink returns p's last component when it is a symbolic link (the
// links of its parents followed), nil when it is anything else: when p ends
// in "/" or "/." (which asks for what the link leads to), is "/", or is
// where a volume or bind mount is.
func (v View) finalLink(p string) (*finalSymlink, error) {
	abs := v.absolute(p)
	if abs == "/" || strings.HasSuffix(p, "/") || strings.HasSuffix(p, "/.") {
		return nil, nil
	}
	pl, err := v.locate(abs)
	if err != nil {
		return nil, err
	}
	if pl.file != "" || pl.dest == abs {
		return nil, nil
	}
	parent, err := securejoin.OpenInRoot(pl.root, path.Dir(pl.rel))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
			return nil, fmt.Errorf("%s: %w", p, core.ErrNoSuchPath)
		}
		return nil, fmt.Errorf("opening the directory of %s: %w", p, err)
	}
	defer parent.Close()
	base := path.Base(pl.rel)
	var st unix.Stat_t
	if err := unix.Fstatat(int(parent.Fd()), base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT || err == unix.ENOTDIR {
			return nil, fmt.Errorf("%s: %w", p, core.ErrNoSuchPath)
		}
		return nil, fmt.Errorf("stat %s: %w", p, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFLNK {
		return nil, nil
	}
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(int(parent.Fd()), base, buf)
	if err != nil {
		return nil, fmt.Errorf("read link %s: %w", p, err)
	}
	joined, err := securejoin.SecureJoin(pl.root, pl.rel)
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %w", p, err)
	}
	resolved := path.Join(pl.dest, "/"+strings.TrimPrefix(strings.TrimPrefix(joined, filepath.Clean(pl.root)), "/"))
	return &finalSymlink{st: st, text: string(buf[:n]), resolved: resolved}, nil
}

// DockerStat describes p as dockerd's X-Docker-Container-Path-Stat does
// (see WriteDockerArchive): a last component that is a symbolic link is
// described as the link, with LinkTarget the container path it leads to;
// anything else with its target's metadata and no LinkTarget. Name is p's
// last component as given ("." for "DIR/.").
func (v View) DockerStat(p string) (core.PathStat, error) {
	link, err := v.finalLink(p)
	if err != nil {
		return core.PathStat{}, err
	}
	name := path.Base(v.absolute(p))
	if p == "/" || strings.HasSuffix(p, "/.") {
		name = "."
	}
	if link != nil {
		return core.PathStat{
			Name: name, Size: link.st.Size, Mode: fs.ModeSymlink | fs.FileMode(link.st.Mode&0o777),
			ModTime: time.Unix(link.st.Mtim.Sec, link.st.Mtim.Nsec), LinkTarget: link.resolved,
		}, nil
	}
	st, err := v.Stat(p)
	if err != nil {
		return core.PathStat{}, err
	}
	st.Name, st.LinkTarget = name, ""
	return st, nil
}

// Stat describes p as Podman's X-Docker-Container-Path-Stat does: symbolic
// links followed; LinkTarget is the resolved container path with the
// trailing "/" or "/." of p kept.
func (v View) Stat(p string) (core.PathStat, error) {
	if p == "/" {
		p = "/."
	}
	rp, err := v.open(p)
	if err != nil {
		return core.PathStat{}, err
	}
	defer rp.handle.Close()
	fi, err := rp.handle.Stat()
	if err != nil {
		return core.PathStat{}, fmt.Errorf("stat %s: %w", p, err)
	}
	target := keepBase(p, rp.cpath)
	return core.PathStat{
		Name:       path.Base(target),
		Size:       fi.Size(),
		Mode:       fi.Mode(),
		ModTime:    fi.ModTime(),
		IsDir:      fi.IsDir(),
		LinkTarget: target,
	}, nil
}

// keepBase gives resolved the trailing "/" or "/." that original has:
// clients read them to tell "the directory" from "its contents".
func keepBase(original, resolved string) string {
	switch {
	case strings.HasSuffix(original, "/."):
		if strings.HasSuffix(resolved, "/") {
			return resolved + "."
		}
		return resolved + "/."
	case strings.HasSuffix(original, "/") && !strings.HasSuffix(resolved, "/"):
		return resolved + "/"
	}
	return resolved
}
