package containerfs

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/containers/storage/pkg/archive"
	securejoin "github.com/cyphar/filepath-securejoin"
	"golang.org/x/sys/unix"

	"github.com/berth-project/berth/engine/internal/core"
)

// Owner is a user and group to own extracted files.
type Owner struct{ UID, GID int }

// PutOptions tune Extract.
type PutOptions struct {
	// Owner, when set, owns every entry instead of the archive's owners.
	Owner *Owner
	// NoOverwriteDirNonDir refuses to replace a directory with a
	// non-directory and the other way round.
	NoOverwriteDirNonDir bool
	// Rename maps entry names (or leading directories of them) to new names.
	Rename map[string]string
}

// badArchive is the error of an archive the engine refuses.
func badArchive(format string, args ...any) error {
	return core.InvalidArgument("archive", fmt.Errorf(format, args...))
}

// EntryName is where an archive entry (or a hard link's target) goes,
// relative to the extraction directory: a leading "/" is dropped, the name
// is cleaned and renamed (a key of rename matches the whole name or its
// leading directories). A name that climbs out of the extraction directory
// with ".." is refused. "" is the extraction directory itself.
func EntryName(name string, rename map[string]string) (string, error) {
	if strings.IndexByte(name, 0) >= 0 {
		return "", badArchive("entry %q: NUL in name", name)
	}
	rel := path.Clean(strings.TrimLeft(name, "/"))
	if rel == "." {
		return "", nil
	}
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return "", badArchive("entry %q leaves the destination", name)
	}
	for from, to := range rename {
		from = path.Clean(strings.TrimLeft(from, "/"))
		if rel == from || strings.HasPrefix(rel, from+"/") {
			renamed := path.Clean(strings.TrimLeft(to+strings.TrimPrefix(rel, from), "/"))
			if renamed == "." || renamed == ".." || strings.HasPrefix(renamed, "../") {
				return "", badArchive("entry %q renamed to %q leaves the destination", name, to)
			}
			return renamed, nil
		}
	}
	return rel, nil
}

// checkHeader refuses entries Extract cannot place safely.
func checkHeader(h *tar.Header, rename map[string]string) error {
	switch h.Typeflag {
	case tar.TypeReg, tar.TypeDir, tar.TypeSymlink, tar.TypeChar, tar.TypeBlock, tar.TypeFifo, tar.TypeXGlobalHeader:
	case tar.TypeLink:
		target, err := EntryName(h.Linkname, rename)
		if err != nil {
			return err
		}
		if target == "" {
			return badArchive("hard link %q to the destination directory", h.Name)
		}
	default:
		return badArchive("entry %q has unsupported type %q", h.Name, h.Typeflag)
	}
	if _, err := EntryName(h.Name, rename); err != nil {
		return err
	}
	if h.Typeflag == tar.TypeSymlink && strings.IndexByte(h.Linkname, 0) >= 0 {
		return badArchive("symbolic link %q: NUL in target", h.Name)
	}
	return nil
}

// Receive reads an archive (uncompressed, or gzip, bzip2, xz or zstd
// compressed), checks every entry, and writes the uncompressed archive to
// spool for Extract. A malformed archive, or an entry that would leave the
// destination, is an ErrInvalidArgument about "archive".
func Receive(r io.Reader, spool io.Writer, rename map[string]string) error {
	stream, err := archive.DecompressStream(r)
	if err != nil {
		return badArchive("%v", err)
	}
	defer stream.Close()
	counted := &countingWriter{w: spool}
	tr := tar.NewReader(io.TeeReader(stream, counted))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if counted.err != nil {
				return fmt.Errorf("keeping the archive: %w", counted.err)
			}
			if errors.Is(err, core.ErrTooLarge) {
				// The reader's bound (what the archive expands to), not the archive's fault.
				return err
			}
			return badArchive("not a valid tar archive: %v", err)
		}
		if err := checkHeader(h, rename); err != nil {
			return err
		}
	}
	if counted.err != nil {
		return fmt.Errorf("keeping the archive: %w", counted.err)
	}
	if counted.n%512 != 0 {
		return badArchive("not a valid tar archive: truncated")
	}
	return nil
}

type countingWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}

// Extract writes the archive that Receive kept into the directory dir of
// the container. Every entry is placed through directory handles inside
// dir's tree (symbolic links, also ones the archive itself creates, resolve
// inside it; an existing link is replaced, never written through). Before the
// first write every entry is checked against what exists, so a conflict
// (NoOverwriteDirNonDir) leaves the container unchanged.
func (v View) Extract(dir string, spool io.ReadSeeker, opts PutOptions) error {
	rp, err := v.open(dir)
	if err != nil {
		return err
	}
	defer rp.handle.Close()
	fi, err := rp.handle.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return core.InvalidArgument("path", fmt.Errorf("%s is not a directory", dir))
	}
	if rp.place.readOnly {
		return fmt.Errorf("%s is on a read-only mount: %w", dir, core.ErrStateConflict)
	}
	root, err := os.OpenFile(rp.place.root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer root.Close()
	x := &extractor{root: root, dest: rp.inRoot, opts: opts}
	if err := x.each(spool, x.preflight); err != nil {
		return err
	}
	if err := x.each(spool, x.place); err != nil {
		return err
	}
	return x.finishDirs()
}

type extractor struct {
	root *os.File
	// dest is the extraction directory below root.
	dest string
	opts PutOptions
	// dirs are the directories to give their metadata once filled.
	dirs []dirMeta
	// planned are the types of the entries preflight saw so far, by name;
	// parentOK the directories it found usable.
	planned  map[string]byte
	parentOK map[string]bool
}

type dirMeta struct {
	rel string
	hdr *tar.Header
}

// each runs fn on every entry of the spooled archive.
func (x *extractor) each(spool io.ReadSeeker, fn func(*tar.Header, string, io.Reader) error) error {
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return err
	}
	tr := tar.NewReader(spool)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return badArchive("not a valid tar archive: %v", err)
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		name, err := EntryName(h.Name, x.opts.Rename)
		if err != nil {
			return err
		}
		if name == "" {
			continue
		}
		if err := fn(h, name, tr); err != nil {
			return err
		}
	}
}

// preflight checks an entry against what exists and what the archive
// placed before it, so that extraction cannot fail half way: every parent
// directory must be a directory or creatable (not a file, nor a symbolic
// link the archive itself made, nor a dangling link), and with
// NoOverwriteDirNonDir no directory and non-directory replace each other.
func (x *extractor) preflight(h *tar.Header, name string, _ io.Reader) error {
	if x.planned == nil {
		x.planned = map[string]byte{}
		x.parentOK = map[string]bool{}
	}
	isDir := h.Typeflag == tar.TypeDir
	if err := x.checkParents(h.Name, path.Dir(name)); err != nil {
		return err
	}
	if h.Typeflag == tar.TypeLink {
		if err := x.checkLinkTarget(h); err != nil {
			return err
		}
	}
	defer func() { x.planned[name] = h.Typeflag }()
	if earlier, ok := x.planned[name]; ok {
		if x.opts.NoOverwriteDirNonDir && (earlier == tar.TypeDir) != isDir {
			return badArchive("entry %q changes the type of an earlier entry", h.Name)
		}
		return nil
	}
	if !x.opts.NoOverwriteDirNonDir {
		return nil
	}
	var st unix.Stat_t
	if !x.statAt(path.Dir(name), path.Base(name), &st) {
		return nil
	}
	existingDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	if existingDir != isDir {
		what := "a directory with a non-directory"
		if !existingDir {
			what = "a non-directory with a directory"
		}
		return core.InvalidArgument("noOverwriteDirNonDir", fmt.Errorf("%s would replace %s", name, what))
	}
	return nil
}

// checkLinkTarget checks that a hard link's target is a non-directory the
// archive placed before, or one that exists inside the destination's tree.
func (x *extractor) checkLinkTarget(h *tar.Header) error {
	target, err := EntryName(h.Linkname, x.opts.Rename)
	if err != nil {
		return err
	}
	if typ, ok := x.planned[target]; ok {
		if typ == tar.TypeDir {
			return badArchive("hard link %q to the directory %q", h.Name, h.Linkname)
		}
		return nil
	}
	var st unix.Stat_t
	if !x.statAt(path.Dir(target), path.Base(target), &st) || st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return badArchive("hard link %q: no file %q in the destination", h.Name, h.Linkname)
	}
	return nil
}

// checkParents checks that dir (relative to the destination) is, or can be
// made, a directory.
func (x *extractor) checkParents(entry, dir string) error {
	if dir == "." || x.parentOK[dir] {
		return nil
	}
	if err := x.checkParents(entry, path.Dir(dir)); err != nil {
		return err
	}
	if typ, ok := x.planned[dir]; ok {
		if typ != tar.TypeDir {
			return badArchive("entry %q goes through %q, which the archive makes a non-directory", entry, dir)
		}
		x.parentOK[dir] = true
		return nil
	}
	h, err := securejoin.OpenatInRoot(x.root, path.Join(x.dest, dir))
	if err == nil {
		fi, serr := h.Stat()
		h.Close()
		if serr != nil || !fi.IsDir() {
			return badArchive("entry %q: %s is not a directory", entry, dir)
		}
		x.parentOK[dir] = true
		return nil
	}
	// Missing: MkdirAll creates it, unless something (a dangling link) is there.
	var st unix.Stat_t
	if x.statAt(path.Dir(dir), path.Base(dir), &st) {
		return badArchive("entry %q: %s is not a directory", entry, dir)
	}
	x.parentOK[dir] = true
	return nil
}

// statAt lstats base in the directory dir below the destination; it reports
// whether something is there.
func (x *extractor) statAt(dir, base string, st *unix.Stat_t) bool {
	parent, err := securejoin.OpenatInRoot(x.root, path.Join(x.dest, dir))
	if err != nil {
		return false
	}
	defer parent.Close()
	return unix.Fstatat(int(parent.Fd()), base, st, unix.AT_SYMLINK_NOFOLLOW) == nil
}

// place creates one entry.
func (x *extractor) place(h *tar.Header, name string, content io.Reader) error {
	parent, err := securejoin.MkdirAllHandle(x.root, path.Join(x.dest, path.Dir(name)), 0o755)
	if err != nil {
		return fmt.Errorf("creating the parent of %s: %w", name, err)
	}
	defer parent.Close()
	pfd := int(parent.Fd())
	base := path.Base(name)
	var st unix.Stat_t
	exists := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
	existingDir := exists && st.Mode&unix.S_IFMT == unix.S_IFDIR
	if exists && !(existingDir && h.Typeflag == tar.TypeDir) {
		if err := removeAt(parent, base, existingDir); err != nil {
			return fmt.Errorf("replacing %s: %w", name, err)
		}
	}
	uid, gid := h.Uid, h.Gid
	if x.opts.Owner != nil {
		uid, gid = x.opts.Owner.UID, x.opts.Owner.GID
	}
	mode := uint32(h.Mode & 0o7777)
	switch h.Typeflag {
	case tar.TypeDir:
		if !existingDir {
			if err := unix.Mkdirat(pfd, base, 0o700); err != nil {
				return fmt.Errorf("creating %s: %w", name, err)
			}
		}
		x.dirs = append(x.dirs, dirMeta{rel: path.Join(x.dest, name), hdr: h})
		return nil
	case tar.TypeReg: // tar.Reader hands old archives' TypeRegA over as TypeReg
		fd, err := unix.Openat(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return fmt.Errorf("creating %s: %w", name, err)
		}
		f := os.NewFile(uintptr(fd), name)
		_, err = io.Copy(f, content)
		if err == nil {
			err = f.Chown(uid, gid)
		}
		if err == nil {
			err = f.Chmod(os.FileMode(mode&0o777) | unixModeBits(mode))
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	case tar.TypeSymlink:
		if err := unix.Symlinkat(h.Linkname, pfd, base); err != nil {
			return fmt.Errorf("creating %s: %w", name, err)
		}
		if err := unix.Fchownat(pfd, base, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("owning %s: %w", name, err)
		}
	case tar.TypeLink:
		target, _ := EntryName(h.Linkname, x.opts.Rename)
		tparent, err := securejoin.OpenatInRoot(x.root, path.Join(x.dest, path.Dir(target)))
		if err != nil {
			return badArchive("hard link %q: target %q: %v", h.Name, h.Linkname, err)
		}
		defer tparent.Close()
		if err := unix.Linkat(int(tparent.Fd()), path.Base(target), pfd, base, 0); err != nil {
			return badArchive("hard link %q to %q: %v", h.Name, h.Linkname, err)
		}
		return nil
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		kind := uint32(unix.S_IFIFO)
		if h.Typeflag == tar.TypeChar {
			kind = unix.S_IFCHR
		} else if h.Typeflag == tar.TypeBlock {
			kind = unix.S_IFBLK
		}
		dev := unix.Mkdev(uint32(h.Devmajor), uint32(h.Devminor))
		if err := unix.Mknodat(pfd, base, kind|mode&0o777, int(dev)); err != nil {
			return fmt.Errorf("creating %s: %w", name, err)
		}
		if err := unix.Fchownat(pfd, base, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("owning %s: %w", name, err)
		}
	}
	if h.ModTime.IsZero() {
		return nil
	}
	times := []unix.Timespec{unix.NsecToTimespec(h.ModTime.UnixNano()), unix.NsecToTimespec(h.ModTime.UnixNano())}
	if err := unix.UtimesNanoAt(pfd, base, times, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("setting the times of %s: %w", name, err)
	}
	return nil
}

// unixModeBits converts setuid, setgid and sticky bits to os.FileMode.
func unixModeBits(mode uint32) os.FileMode {
	var out os.FileMode
	if mode&unix.S_ISUID != 0 {
		out |= os.ModeSetuid
	}
	if mode&unix.S_ISGID != 0 {
		out |= os.ModeSetgid
	}
	if mode&unix.S_ISVTX != 0 {
		out |= os.ModeSticky
	}
	return out
}

// removeAt removes base from the directory parent (with its contents when
// it is a directory); it never follows a symbolic link.
func removeAt(parent *os.File, base string, dir bool) error {
	if !dir {
		return unix.Unlinkat(int(parent.Fd()), base, 0)
	}
	// os.RemoveAll works through directory handles below the magic link of
	// the parent's handle, which names the parent itself.
	return os.RemoveAll(procFD(parent) + "/" + base)
}

// procFD is the /proc path of an open file's handle.
func procFD(f *os.File) string {
	return "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
}

// finishDirs gives the extracted directories their owners, modes and
// times, deepest first, once their contents are in place.
func (x *extractor) finishDirs() error {
	for i := len(x.dirs) - 1; i >= 0; i-- {
		d := x.dirs[i]
		h, err := securejoin.OpenatInRoot(x.root, d.rel)
		if err != nil {
			return fmt.Errorf("finishing %s: %w", d.rel, err)
		}
		uid, gid := d.hdr.Uid, d.hdr.Gid
		if x.opts.Owner != nil {
			uid, gid = x.opts.Owner.UID, x.opts.Owner.GID
		}
		p := procFD(h)
		mode := uint32(d.hdr.Mode & 0o7777)
		err = os.Chown(p, uid, gid)
		if err == nil {
			err = os.Chmod(p, os.FileMode(mode&0o777)|unixModeBits(mode))
		}
		if err == nil && !d.hdr.ModTime.IsZero() {
			err = os.Chtimes(p, d.hdr.ModTime, d.hdr.ModTime)
		}
		h.Close()
		if err != nil {
			return fmt.Errorf("finishing %s: %w", d.rel, err)
		}
	}
	return nil
}
