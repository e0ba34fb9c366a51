package build

import (
	"crypto/sha256"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	securejoin "github.com/cyphar/filepath-securejoin"
)

// tree is a file tree COPY and ADD sources are resolved in: the disk
// (a local context, an extracted one, a mounted image), or the index of a
// received context, which answers the cache's questions (which files a
// source names, their modes, link targets and checksums) without the
// context being extracted. Paths are absolute, as on disk.
type tree interface {
	securejoin.VFS
	// walkDir visits root and what is under it as filepath.WalkDir does.
	walkDir(root string, fn fs.WalkDirFunc) error
	// sum is a regular file's SHA-256 when the tree knows it.
	sum(abs string) ([sha256.Size]byte, bool)
	// readFile reads a file (the Containerfile, ignore files).
	readFile(abs string) ([]byte, error)
}

// diskTree is the file system.
type diskTree struct{}

func (diskTree) Lstat(name string) (os.FileInfo, error)       { return os.Lstat(name) }
func (diskTree) Readlink(name string) (string, error)         { return os.Readlink(name) }
func (diskTree) walkDir(root string, fn fs.WalkDirFunc) error { return filepath.WalkDir(root, fn) }
func (diskTree) sum(string) ([sha256.Size]byte, bool)         { return [sha256.Size]byte{}, false }
func (diskTree) readFile(abs string) ([]byte, error)          { return os.ReadFile(abs) }

// indexNode is one path of an indexed context.
type indexNode struct {
	mode     fs.FileMode
	size     int64
	mtime    time.Time
	link     string
	checksum [sha256.Size]byte
	// data is a small file's content, kept for readFile.
	data []byte
	// children are a directory's entry names.
	children map[string]bool
}

// indexTree is a received context as extracting it would lay it out under
// root, built from the tar headers and the checksums computed while the
// stream was read. Entries are placed as the extraction places them:
// parents resolved through symbolic links inside the tree, a later entry
// replacing an earlier one of another type.
type indexTree struct {
	root  string
	nodes map[string]*indexNode
	// large reads a file whose content was not kept (it extracts the
	// context first).
	large func(abs string) ([]byte, error)
}

// keepLimit is the largest file whose content the index keeps.
const keepLimit = 256 << 10

func newIndexTree(root string) *indexTree {
	t := &indexTree{root: root, nodes: map[string]*indexNode{}}
	t.nodes[root] = &indexNode{mode: fs.ModeDir | 0o755, children: map[string]bool{}}
	return t
}

func (t *indexTree) notExist(op, name string) error {
	return &fs.PathError{Op: op, Path: name, Err: syscall.ENOENT}
}

// Lstat implements securejoin.VFS.
func (t *indexTree) Lstat(name string) (os.FileInfo, error) {
	n, ok := t.nodes[filepath.Clean(name)]
	if !ok {
		return nil, t.notExist("lstat", name)
	}
	return indexInfo{name: filepath.Base(name), n: n}, nil
}

// Readlink implements securejoin.VFS.
func (t *indexTree) Readlink(name string) (string, error) {
	n, ok := t.nodes[filepath.Clean(name)]
	if !ok {
		return "", t.notExist("readlink", name)
	}
	if n.mode&fs.ModeSymlink == 0 {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: syscall.EINVAL}
	}
	return n.link, nil
}

func (t *indexTree) sum(abs string) ([sha256.Size]byte, bool) {
	n, ok := t.nodes[filepath.Clean(abs)]
	if !ok || !n.mode.IsRegular() {
		return [sha256.Size]byte{}, false
	}
	return n.checksum, true
}

func (t *indexTree) readFile(abs string) ([]byte, error) {
	n, ok := t.nodes[filepath.Clean(abs)]
	switch {
	case !ok:
		return nil, t.notExist("open", abs)
	case n.mode.IsDir():
		return nil, &fs.PathError{Op: "read", Path: abs, Err: syscall.EISDIR}
	case n.data != nil || n.size == 0:
		return append([]byte(nil), n.data...), nil
	}
	return t.large(abs)
}

// walkDir visits the tree in lexical order, honouring fs.SkipDir and
// fs.SkipAll as filepath.WalkDir does.
func (t *indexTree) walkDir(root string, fn fs.WalkDirFunc) error {
	root = filepath.Clean(root)
	n, ok := t.nodes[root]
	if !ok {
		return fn(root, nil, t.notExist("lstat", root))
	}
	err := t.walk(root, n, fn)
	if errors.Is(err, fs.SkipDir) || errors.Is(err, fs.SkipAll) {
		return nil
	}
	return err
}

func (t *indexTree) walk(p string, n *indexNode, fn fs.WalkDirFunc) error {
	if err := fn(p, indexInfo{name: filepath.Base(p), n: n}, nil); err != nil || !n.mode.IsDir() {
		return err
	}
	names := make([]string, 0, len(n.children))
	for name := range n.children {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		child := filepath.Join(p, name)
		err := t.walk(child, t.nodes[child], fn)
		if errors.Is(err, fs.SkipDir) {
			if t.nodes[child].mode.IsDir() {
				continue
			}
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// parent resolves the directory an entry lands in, creating missing
// directories as os.MkdirAll would (an existing non-directory on the way
// is an error, as on disk).
func (t *indexTree) parent(rel string) (string, error) {
	dir, err := securejoin.SecureJoinVFS(t.root, path.Dir(rel), t)
	if err != nil {
		return "", err
	}
	relDir, err := filepath.Rel(t.root, dir)
	if err != nil {
		return "", err
	}
	p := t.root
	if relDir == "." {
		return p, nil
	}
	for _, part := range strings.Split(filepath.ToSlash(relDir), "/") {
		child := filepath.Join(p, part)
		n, ok := t.nodes[child]
		switch {
		case !ok:
			t.add(child, &indexNode{mode: fs.ModeDir | 0o755, children: map[string]bool{}})
		case !n.mode.IsDir():
			return "", &fs.PathError{Op: "mkdir", Path: child, Err: syscall.ENOTDIR}
		}
		p = child
	}
	return p, nil
}

// add puts a node at p (whose parent exists), replacing what is there.
func (t *indexTree) add(p string, n *indexNode) {
	t.remove(p)
	t.nodes[p] = n
	t.nodes[filepath.Dir(p)].children[filepath.Base(p)] = true
}

// remove deletes p and everything under it.
func (t *indexTree) remove(p string) {
	n, ok := t.nodes[p]
	if !ok {
		return
	}
	for name := range n.children {
		t.remove(filepath.Join(p, name))
	}
	delete(t.nodes, p)
	if parent, ok := t.nodes[filepath.Dir(p)]; ok {
		delete(parent.children, filepath.Base(p))
	}
}

// indexInfo is an indexNode as fs.FileInfo and fs.DirEntry.
type indexInfo struct {
	name string
	n    *indexNode
}

func (i indexInfo) Name() string               { return i.name }
func (i indexInfo) Size() int64                { return i.n.size }
func (i indexInfo) Mode() fs.FileMode          { return i.n.mode }
func (i indexInfo) ModTime() time.Time         { return i.n.mtime }
func (i indexInfo) IsDir() bool                { return i.n.mode.IsDir() }
func (i indexInfo) Sys() any                   { return nil }
func (i indexInfo) Type() fs.FileMode          { return i.n.mode.Type() }
func (i indexInfo) Info() (fs.FileInfo, error) { return i, nil }
