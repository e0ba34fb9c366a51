package files

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"
)

// Errors of tree operations; the API maps them to status codes.
var (
	// ErrNotExist: the path (or the upload's tree) does not exist.
	ErrNotExist = fmt.Errorf("no such file or directory: %w", fs.ErrNotExist)
	// ErrConflict: the path clashes with what is on disk (a file where a directory is
	// needed, or a directory where a file would go).
	ErrConflict = errors.New("path conflicts with an existing file or directory")
	// ErrIsDir: raw bytes were asked of a directory.
	ErrIsDir = errors.New("is a directory")
	// ErrRootRefused: the upload's root cannot be written or deleted as a file.
	ErrRootRefused = errors.New("the root of an upload cannot be written or deleted")
)

// LimitError reports an exceeded limit (file size, upload size, file count, path length
// or depth). Nothing of the refused write is left on disk.
type LimitError struct {
	Limit string // which limit, e.g. "maxFileSize"
	Max   int64
}

func (e *LimitError) Error() string { return fmt.Sprintf("limit %s (%d) exceeded", e.Limit, e.Max) }

// Usage is what an upload's files take: their bytes and their number.
type Usage struct {
	Bytes int64
	Files int
}

// Limits bound an upload's usage; zero means unlimited.
type Limits struct {
	MaxBytes int64
	MaxFiles int
}

// admit refuses a change from booked to next that grows the upload past a limit (a
// change that shrinks, or keeps, an upload over its limits is let through).
func (l Limits) admit(booked, next Usage) error {
	if l.MaxBytes > 0 && next.Bytes > l.MaxBytes && next.Bytes > booked.Bytes {
		return &LimitError{Limit: "maxUploadSize", Max: l.MaxBytes}
	}
	if l.MaxFiles > 0 && next.Files > l.MaxFiles && next.Files > booked.Files {
		return &LimitError{Limit: "maxFiles", Max: int64(l.MaxFiles)}
	}
	return nil
}

// Guard is how Tree changes an upload's files: Locked runs fn under the upload's lock
// that every process sharing the data directory shares, passing the usage on the books
// and its generation (one more per booked change), and books the usage fn returns with
// the next generation before the lock is released; when fn fails, nothing is booked.
// Locked refuses to run fn when the upload no longer takes changes (it left the open
// state, or is gone). Limits are the upload limits checked before a write.
type Guard interface {
	Locked(fn func(booked Usage, gen int64) (Usage, error)) error
	Limits() Limits
}

const (
	filesDir = "files"
	tmpDir   = "tmp"
	copyBuf  = 256 << 10
)

// Tree stores each upload's files under base/<id>/files, with temporaries in
// base/<id>/tmp so a rename into place is atomic and unfinished files are never listed.
type Tree struct {
	base  string
	bufs  sync.Pool
	mu    sync.Mutex
	locks map[string]*uploadLock
}

type uploadLock struct {
	sync.Mutex
	refs int
}

// New returns a Tree rooted at dataDir/uploads, creating it if needed.
func New(dataDir string) (*Tree, error) {
	base := filepath.Join(dataDir, "uploads")
	if err := os.MkdirAll(base, 0o750); err != nil {
		return nil, fmt.Errorf("create upload tree: %w", err)
	}
	t := &Tree{base: base, locks: map[string]*uploadLock{}}
	t.bufs.New = func() any { b := make([]byte, copyBuf); return &b }
	return t, nil
}

// tempGrace is how young an unlocked temporary may be and still be left
// alone by SweepTemp: the moment between its creation and its writer's lock.
const tempGrace = 30 * time.Second

// SweepTemp removes the temporaries whose writer is gone: a writer holds an
// exclusive flock on its temporary for as long as it exists, and the kernel
// releases it when the writer's process dies, however it dies. Temporaries
// of writes in progress (here or in another process sharing the directory)
// are left alone. It returns how many it removed.
func (t *Tree) SweepTemp() (int, error) {
	matches, err := filepath.Glob(filepath.Join(t.base, "*", tmpDir, "put-*"))
	if err != nil {
		return 0, err
	}
	removed := 0
	cutoff := time.Now().Add(-tempGrace)
	for _, m := range matches {
		fi, err := os.Lstat(m)
		if err != nil || !fi.Mode().IsRegular() || fi.ModTime().After(cutoff) {
			continue
		}
		if writerGone(m) && os.Remove(m) == nil {
			removed++
		}
	}
	return removed, nil
}

// writerGone reports whether nobody holds the lock of temporary path.
func writerGone(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return false
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return true
}

// TempBytes is the size of upload id's temporaries: writes in progress and
// what killed writers left until SweepTemp removes it. They count against
// the upload's size limit while they exist.
func (t *Tree) TempBytes(id string) int64 {
	entries, err := os.ReadDir(filepath.Join(t.base, id, tmpDir))
	if err != nil {
		return 0
	}
	var total int64
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if info, err := e.Info(); err == nil {
			total += info.Size()
		}
	}
	return total
}

// Exists reports whether upload id has a tree (false only when it surely has none).
func (t *Tree) Exists(id string) bool {
	_, err := os.Lstat(filepath.Join(t.base, id, filesDir))
	return !errors.Is(err, fs.ErrNotExist)
}

// Dir is the absolute directory holding the files of upload id.
func (t *Tree) Dir(id string) string { return filepath.Join(t.base, id, filesDir) }

// Create makes the empty tree of a new upload.
func (t *Tree) Create(id string) error {
	for _, d := range []string{filesDir, tmpDir} {
		if err := os.MkdirAll(filepath.Join(t.base, id, d), 0o750); err != nil {
			return fmt.Errorf("create tree of %s: %w", id, err)
		}
	}
	return nil
}

// Remove deletes every file of upload id; a missing tree is not an error. A write that
// was streaming when the upload was deleted may still add a temporary while the tree goes
// (it is refused later, under the lock): the removal starts over until the tree is gone.
func (t *Tree) Remove(id string) error {
	dir := filepath.Join(t.base, id)
	var err error
	for range 50 {
		if err = os.RemoveAll(dir); err == nil {
			return nil
		}
		if !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) && !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	return fmt.Errorf("remove tree of %s: %w", id, err)
}

// TreeInfo is one upload tree found by Trees.
type TreeInfo struct {
	ID string
	// Age is how long ago the tree's top directory last changed.
	Age time.Duration
}

// Trees lists the upload trees on disk, for a sweep to remove those without an upload.
func (t *Tree) Trees() ([]TreeInfo, error) {
	entries, err := os.ReadDir(t.base)
	if err != nil {
		return nil, err
	}
	out := make([]TreeInfo, 0, len(entries))
	for _, e := range entries {
		if !e.IsDir() || len(e.Name()) != 36 {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, TreeInfo{ID: e.Name(), Age: time.Since(info.ModTime())})
	}
	return out, nil
}

func (t *Tree) lock(id string) func() {
	t.mu.Lock()
	l := t.locks[id]
	if l == nil {
		l = &uploadLock{}
		t.locks[id] = l
	}
	l.refs++
	t.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		t.mu.Lock()
		l.refs--
		if l.refs == 0 {
			delete(t.locks, id)
		}
		t.mu.Unlock()
	}
}

func (t *Tree) openUpload(id string) (*os.Root, error) {
	r, err := os.OpenRoot(filepath.Join(t.base, id))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, ErrNotExist
		}
		return nil, fmt.Errorf("open tree of %s: %w", id, err)
	}
	return r, nil
}

func (t *Tree) openFiles(id string) (*os.Root, error) {
	r, err := t.openUpload(id)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	fr, err := r.OpenRoot(filesDir)
	if err != nil {
		return nil, readErr(err)
	}
	return fr, nil
}

// readErr maps errors of lookups to ErrNotExist where the path simply is not there
// (including a path running through a regular file, a name too long, or a link that
// would leave the tree).
func readErr(err error) error {
	var errno syscall.Errno
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.As(err, &errno) && (errno == syscall.ENOTDIR || errno == syscall.ENAMETOOLONG || errno == syscall.ELOOP):
		return ErrNotExist
	case isEscape(err):
		return ErrNotExist
	}
	return err
}

// isEscape recognizes os.Root's refusal of a path that leads outside the root: a
// *fs.PathError that carries no system error number.
func isEscape(err error) bool {
	var pe *fs.PathError
	var errno syscall.Errno
	return errors.As(err, &pe) && pe.Err != nil && !errors.As(pe.Err, &errno)
}

// Put streams body into rel of upload id. At most maxSize bytes are accepted; more is a
// *LimitError and nothing is kept. The data goes to a temporary file that is fsynced and
// renamed into place (and the directory fsynced), so readers and concurrent writers of the
// same path see either the old or a complete new file, never a mix. The rename happens
// under g's lock, after the upload limits are checked, and is booked before the lock is
// released; if g refuses, the write is dropped.
//
// sizeHint is the announced length of body (-1 when unknown); it only chooses buffers.
func (t *Tree) Put(id, rel string, body io.Reader, sizeHint, maxSize int64, g Guard) (int64, error) {
	if rel == Root {
		return 0, ErrRootRefused
	}
	root, err := t.openUpload(id)
	if err != nil {
		return 0, err
	}
	defer root.Close()
	tmp, tmpName, n, err := t.writeTemp(root, body, sizeHint, maxSize)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			// The upload's directory went away under the write: it is being deleted.
			return 0, ErrNotExist
		}
		return 0, err
	}
	committed := false
	defer func() {
		if !committed {
			_ = root.Remove(tmpName)
		}
		// Closing releases the writer's lock (see SweepTemp), once the
		// temporary is renamed into place or gone.
		tmp.Close()
	}()

	// The in-process lock only keeps this process's writers of one upload from queueing
	// on the shared lock; the Guard's lock is the one that counts. Neither is held for
	// the directory's fsync below.
	unlock := t.lock(id)
	target := path.Join(filesDir, rel)
	err = g.Locked(func(booked Usage, gen int64) (Usage, error) {
		booked, in, err := t.settle(id, booked, gen)
		if err != nil {
			return Usage{}, err
		}
		defer in.Close()
		change := Usage{Bytes: n, Files: 1}
		fi, err := root.Lstat(target)
		var errno syscall.Errno
		switch {
		case err == nil && !fi.Mode().IsRegular():
			return Usage{}, fmt.Errorf("%w: %q is a directory", ErrConflict, rel)
		case err == nil:
			change = Usage{Bytes: n - fi.Size()}
		case errors.As(err, &errno) && errno == syscall.ENOTDIR:
			return Usage{}, fmt.Errorf("%w: a parent of %q is a file", ErrConflict, rel)
		case !errors.Is(err, fs.ErrNotExist):
			return Usage{}, fmt.Errorf("stat %q: %w", rel, readErrWrite(err))
		}
		next := Usage{Bytes: booked.Bytes + change.Bytes, Files: booked.Files + change.Files}
		// Checked before creating parents, so a refused write leaves no directories either.
		if err := g.Limits().admit(booked, next); err != nil {
			return Usage{}, err
		}
		if err := markIntent(in, gen); err != nil {
			return Usage{}, err
		}
		if err := root.MkdirAll(path.Dir(target), 0o750); err != nil {
			if errors.Is(err, fs.ErrExist) || errors.As(err, &errno) && errno == syscall.ENOTDIR {
				return Usage{}, fmt.Errorf("%w: a parent of %q is a file", ErrConflict, rel)
			}
			return Usage{}, fmt.Errorf("create parents of %q: %w", rel, readErrWrite(err))
		}
		if err := root.Rename(tmpName, target); err != nil {
			return Usage{}, fmt.Errorf("rename into %q: %w", rel, readErrWrite(err))
		}
		committed = true
		return next, nil
	})
	unlock()
	if err != nil {
		return 0, err
	}
	if d, err := root.Open(path.Dir(target)); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return n, fmt.Errorf("sync directory of %q: %w", rel, err)
		}
	}
	return n, nil
}

func readErrWrite(err error) error {
	if isEscape(err) {
		return fmt.Errorf("%w: %v", ErrConflict, err)
	}
	return err
}

// writeTemp writes body into a new temporary of root and returns it open:
// its writer's exclusive lock lasts until the caller closes it.
func (t *Tree) writeTemp(root *os.Root, body io.Reader, sizeHint, maxSize int64) (*os.File, string, int64, error) {
	var rnd [12]byte
	_, _ = rand.Read(rnd[:])
	name := path.Join(tmpDir, "put-"+hex.EncodeToString(rnd[:]))
	if err := root.MkdirAll(tmpDir, 0o750); err != nil {
		return nil, "", 0, fmt.Errorf("create temporary directory: %w", err)
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return nil, "", 0, fmt.Errorf("create temporary file: %w", err)
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	var n int64
	if err == nil {
		n, err = t.copyBody(&writeback{f: f}, io.LimitReader(body, maxSize+1), sizeHint)
	}
	if err == nil && n > maxSize {
		err = &LimitError{Limit: "maxFileSize", Max: maxSize}
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		_ = root.Remove(name)
		f.Close()
		return nil, "", 0, err
	}
	return f, name, n, nil
}

// Delete removes rel of upload id, a directory with everything below it, under g's lock,
// and books what was freed.
func (t *Tree) Delete(id, rel string, g Guard) error {
	if rel == Root {
		return ErrRootRefused
	}
	root, err := t.openFiles(id)
	if err != nil {
		return err
	}
	defer root.Close()
	unlock := t.lock(id)
	defer unlock()
	return g.Locked(func(booked Usage, gen int64) (Usage, error) {
		booked, in, err := t.settle(id, booked, gen)
		if err != nil {
			return Usage{}, err
		}
		defer in.Close()
		fi, err := root.Lstat(rel)
		if err != nil {
			return Usage{}, readErr(err)
		}
		var freed Usage
		if fi.IsDir() {
			if freed, err = measure(root, rel); err != nil {
				return Usage{}, fmt.Errorf("measure %q: %w", rel, err)
			}
		} else if fi.Mode().IsRegular() {
			freed = Usage{Bytes: fi.Size(), Files: 1}
		}
		if err := markIntent(in, gen); err != nil {
			return Usage{}, err
		}
		if err := root.RemoveAll(rel); err != nil {
			return Usage{}, fmt.Errorf("remove %q: %w", rel, err)
		}
		return Usage{Bytes: booked.Bytes - freed.Bytes, Files: booked.Files - freed.Files}, nil
	})
}

// measure adds up the regular files at or below rel of root.
func measure(root *os.Root, rel string) (Usage, error) {
	var u Usage
	err := fs.WalkDir(root.FS(), rel, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			u.Bytes += info.Size()
			u.Files++
		}
		return nil
	})
	return u, err
}

// Usage measures the files of upload id on disk.
func (t *Tree) Usage(id string) (Usage, error) {
	root, err := t.openFiles(id)
	if err != nil {
		return Usage{}, err
	}
	defer root.Close()
	return measure(root, ".")
}

// Entry describes one file or directory.
type Entry struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
	Dir  bool   `json:"dir"`
}

// Info describes a path and, for a directory, one page of its children in name order.
type Info struct {
	Entry
	Children   []Entry `json:"children"`
	NextMarker string  `json:"nextMarker,omitempty"`
}

// Stat describes rel of upload id. For a directory it lists up to limit children whose
// names sort after marker; NextMarker is set when more follow.
func (t *Tree) Stat(id, rel, marker string, limit int) (Info, error) {
	root, err := t.openFiles(id)
	if err != nil {
		return Info{}, err
	}
	defer root.Close()
	fi, err := root.Stat(rel)
	if err != nil {
		return Info{}, readErr(err)
	}
	info := Info{Entry: Entry{Name: rel, Dir: fi.IsDir()}, Children: []Entry{}}
	if !fi.IsDir() {
		info.Size = fi.Size()
		return info, nil
	}
	d, err := root.Open(rel)
	if err != nil {
		return Info{}, readErr(err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return Info{}, fmt.Errorf("list %q: %w", rel, err)
	}
	sort.Strings(names)
	start := sort.SearchStrings(names, marker)
	if start < len(names) && names[start] == marker {
		start++
	}
	for _, name := range names[start:] {
		if len(info.Children) == limit {
			info.NextMarker = info.Children[len(info.Children)-1].Name
			break
		}
		ci, err := root.Lstat(path.Join(rel, name))
		if err != nil {
			continue // removed meanwhile
		}
		e := Entry{Name: name, Dir: ci.IsDir()}
		if ci.Mode().IsRegular() {
			e.Size = ci.Size()
		}
		info.Children = append(info.Children, e)
	}
	return info, nil
}

// FileSize is the size of the regular file rel of upload id, or 0 when there is none.
func (t *Tree) FileSize(id, rel string) int64 {
	root, err := t.openFiles(id)
	if err != nil {
		return 0
	}
	defer root.Close()
	fi, err := root.Lstat(rel)
	if err != nil || !fi.Mode().IsRegular() {
		return 0
	}
	return fi.Size()
}

// Open opens the regular file rel of upload id for reading.
func (t *Tree) Open(id, rel string) (*os.File, fs.FileInfo, error) {
	root, err := t.openFiles(id)
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		return nil, nil, readErr(err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if fi.IsDir() {
		f.Close()
		return nil, nil, ErrIsDir
	}
	return f, fi, nil
}

// Walk returns the regular files of upload id in lexical order of their paths, the order
// in which processing visits them. Symbolic links are not followed.
func (t *Tree) Walk(id string) ([]string, error) {
	root, err := t.openFiles(id)
	if err != nil {
		if errors.Is(err, ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	defer root.Close()
	var out []string
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk tree of %s: %w", id, err)
	}
	return out, nil
}
