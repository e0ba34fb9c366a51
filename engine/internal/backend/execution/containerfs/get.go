package containerfs

import (
	"archive/tar"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	securejoin "github.com/cyphar/filepath-securejoin"
	"golang.org/x/sys/unix"
)

// excluded are the container paths an archive of the root filesystem leaves
// out, as Podman does: the kernel's views, not files.
var excluded = map[string]bool{"/dev": true, "/proc": true, "/sys": true}

// WriteArchive writes p to w as an uncompressed tar: a directory under its
// own name unless p ends in "/." (then its contents), anything else as one
// entry named after it. Symbolic links in p are followed; below it they are
// archived as links. The walk goes through directory handles, never by path.
func (v View) WriteArchive(p string, w io.Writer) error {
	return v.writeArchive(p, w, "", false)
}

// WriteDockerArchive writes p to w as dockerd does, which the docker CLI's
// cp relies on when it renames what it receives: a last component that is
// a symbolic link (and p does not end in "/" or "/.") is archived as the
// link; entries are named after p's last component as given (not the
// resolved one); the contents of "DIR/." are named "./NAME" under a "./"
// entry.
func (v View) WriteDockerArchive(p string, w io.Writer) error {
	link, err := v.finalLink(p)
	if err != nil {
		return err
	}
	if link != nil {
		tw := tar.NewWriter(w)
		hdr := header(&link.st, path.Base(v.absolute(p)))
		hdr.Linkname = link.text
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		return tw.Close()
	}
	if p == "/" || strings.HasSuffix(p, "/.") {
		return v.writeArchive(p, w, ".", true)
	}
	return v.writeArchive(p, w, path.Base(v.absolute(p)), false)
}

// writeArchive writes p to w under name (the resolved path's base where
// name is ""); dot names a directory's contents "./NAME" under a "./"
// entry rather than bare.
func (v View) writeArchive(p string, w io.Writer, name string, dot bool) error {
	if p == "/" {
		p = "/."
	}
	rp, err := v.open(p)
	if err != nil {
		return err
	}
	defer rp.handle.Close()
	h, pl, resolved := rp.handle, rp.place, rp.cpath
	var st unix.Stat_t
	if err := unix.Fstat(int(h.Fd()), &st); err != nil {
		return fmt.Errorf("stat %s: %w", p, err)
	}
	a := &archiver{tw: tar.NewWriter(w), links: map[fileID]string{}, rootTree: pl.dest == "/" && pl.file == ""}
	if name == "" {
		name = path.Base(resolved)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		dir, err := securejoin.Reopen(h, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			return fmt.Errorf("opening %s: %w", p, err)
		}
		defer dir.Close()
		prefix := ""
		switch {
		case dot:
			prefix = "./"
		case path.Base(p) != "." && resolved != "/":
			prefix = name + "/"
		}
		if prefix != "" {
			if err := a.tw.WriteHeader(header(&st, prefix)); err != nil {
				return err
			}
		}
		if err := a.walk(dir, prefix, resolved); err != nil {
			return err
		}
		return a.tw.Close()
	}
	if err := a.entry(&st, name, func() (*os.File, error) { return securejoin.Reopen(h, unix.O_RDONLY) }, func() (string, error) { return "", nil }); err != nil {
		return err
	}
	return a.tw.Close()
}

type fileID struct{ dev, ino uint64 }

type archiver struct {
	tw *tar.Writer
	// links maps a file with several links to the first name it was archived under.
	links map[fileID]string
	// rootTree is set when walking the container's root filesystem, where
	// /dev, /proc and /sys are left out.
	rootTree bool
}

// walk archives the contents of dir (container path cpath) under prefix.
func (a *archiver) walk(dir *os.File, prefix, cpath string) error {
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("reading %s: %w", cpath, err)
	}
	sort.Strings(names)
	dirfd := int(dir.Fd())
	for _, name := range names {
		child := path.Join(cpath, name)
		if a.rootTree && excluded[child] {
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if err == unix.ENOENT {
				continue // removed meanwhile
			}
			return fmt.Errorf("stat %s: %w", child, err)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			if err := a.tw.WriteHeader(header(&st, prefix+name+"/")); err != nil {
				return err
			}
			fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("opening %s: %w", child, err)
			}
			sub := os.NewFile(uintptr(fd), child)
			err = a.walk(sub, prefix+name+"/", child)
			sub.Close()
			if err != nil {
				return err
			}
			continue
		}
		open := func() (*os.File, error) {
			fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
			if err != nil {
				return nil, err
			}
			return os.NewFile(uintptr(fd), child), nil
		}
		readlink := func() (string, error) {
			buf := make([]byte, unix.PathMax)
			n, err := unix.Readlinkat(dirfd, name, buf)
			if err != nil {
				return "", err
			}
			return string(buf[:n]), nil
		}
		if err := a.entry(&st, prefix+name, open, readlink); err != nil {
			return fmt.Errorf("archiving %s: %w", child, err)
		}
	}
	return nil
}

// entry archives one non-directory.
func (a *archiver) entry(st *unix.Stat_t, name string, open func() (*os.File, error), readlink func() (string, error)) error {
	hdr := header(st, name)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		if st.Nlink > 1 {
			id := fileID{dev: st.Dev, ino: st.Ino}
			if first, ok := a.links[id]; ok {
				hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
				return a.tw.WriteHeader(hdr)
			}
			a.links[id] = name
		}
		f, err := open()
		if err != nil {
			return err
		}
		defer f.Close()
		if err := a.tw.WriteHeader(hdr); err != nil {
			return err
		}
		n, err := io.CopyN(a.tw, f, hdr.Size)
		if err != nil && n < hdr.Size {
			return fmt.Errorf("file changed while archived: %w", err)
		}
		return nil
	case unix.S_IFLNK:
		target, err := readlink()
		if err != nil {
			return err
		}
		hdr.Linkname = target
		return a.tw.WriteHeader(hdr)
	case unix.S_IFCHR, unix.S_IFBLK, unix.S_IFIFO:
		return a.tw.WriteHeader(hdr)
	}
	// Sockets have no archive form.
	return nil
}

// header is the tar header of a file with stat st.
func header(st *unix.Stat_t, name string) *tar.Header {
	hdr := &tar.Header{
		Name:    name,
		Mode:    int64(st.Mode & 0o7777),
		Uid:     int(st.Uid),
		Gid:     int(st.Gid),
		ModTime: time.Unix(st.Mtim.Sec, st.Mtim.Nsec),
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		hdr.Typeflag = tar.TypeDir
	case unix.S_IFREG:
		hdr.Typeflag = tar.TypeReg
		hdr.Size = st.Size
	case unix.S_IFLNK:
		hdr.Typeflag = tar.TypeSymlink
	case unix.S_IFCHR:
		hdr.Typeflag = tar.TypeChar
		hdr.Devmajor, hdr.Devminor = int64(unix.Major(st.Rdev)), int64(unix.Minor(st.Rdev))
	case unix.S_IFBLK:
		hdr.Typeflag = tar.TypeBlock
		hdr.Devmajor, hdr.Devminor = int64(unix.Major(st.Rdev)), int64(unix.Minor(st.Rdev))
	case unix.S_IFIFO:
		hdr.Typeflag = tar.TypeFifo
	}
	return hdr
}
