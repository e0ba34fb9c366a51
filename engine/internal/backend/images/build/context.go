package build

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	securejoin "github.com/cyphar/filepath-securejoin"
	"golang.org/x/sys/unix"

	"github.com/berth-project/berth/engine/internal/backend/platform/sizelimit"
	"github.com/berth-project/berth/engine/internal/core"
)

// contextField is the field named by errors about the context's content.
const contextField = "context"

// buildContext is a build's context: a directory on the engine's host
// (local builds), or a received tar stream. A received stream is indexed
// while it is read (every entry placed as extraction would place it, every
// file's SHA-256 computed) and spooled; it is extracted into dir only when
// a step needs its files, so a build answered from the cache never writes
// the context to disk.
type buildContext struct {
	dir string
	// index describes a received context; nil for a local one.
	index *indexTree
	// spool holds a received context's decompressed stream until it is
	// extracted.
	spool     *spool
	extracted bool
	// maxSize bounds the stream when it is read again for extraction.
	maxSize int64
	ph      *phases
}

// files is the tree sources are looked up in for the cache: the index of
// a received context, else the disk.
func (bc *buildContext) files() tree {
	if bc.index != nil {
		return bc.index
	}
	return diskTree{}
}

// materialize extracts a received context into dir, once.
func (bc *buildContext) materialize(ctx context.Context) error {
	if bc.index == nil || bc.extracted {
		return nil
	}
	start := time.Now()
	defer bc.ph.since(phaseExtract, start)
	if err := extractContext(ctx, bc.spool.reader(), bc.dir, sizelimit.New(bc.maxSize, "build context")); err != nil {
		return err
	}
	bc.extracted = true
	bc.spool.close()
	return nil
}

// close frees the spool.
func (bc *buildContext) close() {
	if bc.spool != nil {
		bc.spool.close()
	}
}

// receiveContext reads a build context tar stream (plain or compressed):
// it indexes and spools it without extracting it. Entries are refused as
// extractContext refuses them; budget bounds the expanded size (413 past
// it). spoolDir holds the part of the stream past what is kept in memory.
func receiveContext(ctx context.Context, r io.Reader, dir, spoolDir string, budget *sizelimit.Budget, ph *phases) (_ *buildContext, err error) {
	src, err := budget.Decompress(ctx, r)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	sp := newSpool(spoolDir, spoolMemory, ph)
	defer func() {
		if err != nil {
			sp.close()
		}
	}()
	idx := newIndexTree(dir)
	bc := &buildContext{dir: dir, index: idx, spool: sp, maxSize: budget.Max(), ph: ph}
	idx.large = func(abs string) ([]byte, error) {
		if err := bc.materialize(ctx); err != nil {
			return nil, err
		}
		return os.ReadFile(abs)
	}
	tr := tar.NewReader(io.TeeReader(src, sp))
	buf := make([]byte, 256<<10)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return bc, nil
		}
		if err != nil {
			return nil, streamError(ctx, err)
		}
		name, err := entryName(hdr.Name)
		if err != nil {
			return nil, err
		}
		if name == "." {
			continue
		}
		parent, err := idx.parent(name)
		if err != nil {
			return nil, core.InvalidArgument(contextField, fmt.Errorf("entry %q: %w", hdr.Name, err))
		}
		target := filepath.Join(parent, path.Base(name))
		mode := os.FileMode(hdr.Mode).Perm() | os.FileMode(hdr.Mode)&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if n, ok := idx.nodes[target]; ok && n.mode.IsDir() {
				n.mode = fs.ModeDir | mode
			} else {
				idx.add(target, &indexNode{mode: fs.ModeDir | mode, children: map[string]bool{}})
			}
		case tar.TypeReg:
			n := &indexNode{mode: mode, mtime: hdr.ModTime}
			if n.size, n.checksum, n.data, err = hashEntry(ctx, tr, buf, ph); err != nil {
				return nil, err
			}
			idx.add(target, n)
		case tar.TypeSymlink:
			idx.add(target, &indexNode{mode: fs.ModeSymlink | 0o777, link: hdr.Linkname, mtime: hdr.ModTime})
		case tar.TypeLink:
			linked, err := entryName(hdr.Linkname)
			if err != nil {
				return nil, err
			}
			from, err := securejoin.SecureJoinVFS(dir, linked, idx)
			if err != nil {
				return nil, err
			}
			n, ok := idx.nodes[from]
			if !ok || !n.mode.IsRegular() {
				return nil, core.InvalidArgument(contextField, fmt.Errorf("hard link %q points to %q, which is not a file earlier in the context", hdr.Name, hdr.Linkname))
			}
			linkedNode := *n
			idx.add(target, &linkedNode)
		default:
			return nil, core.InvalidArgument(contextField, fmt.Errorf("entry %q has an unsupported type %q", hdr.Name, hdr.Typeflag))
		}
	}
}

// streamError is the error of a broken context stream: the size limit and
// a cancelled request keep theirs, anything else is the client's (400).
func streamError(ctx context.Context, err error) error {
	if errors.Is(err, core.ErrTooLarge) || ctx.Err() != nil {
		return err
	}
	return core.InvalidArgument(contextField, fmt.Errorf("reading tar: %w", err))
}

// hashEntry reads a file entry's content, returning its size and SHA-256,
// and the content itself when it is small.
func hashEntry(ctx context.Context, r io.Reader, buf []byte, ph *phases) (int64, [sha256.Size]byte, []byte, error) {
	var sum [sha256.Size]byte
	var kept bytes.Buffer
	h := sha256.New()
	var size int64
	for {
		n, err := r.Read(buf)
		if n > 0 {
			start := time.Now()
			h.Write(buf[:n])
			ph.since(phaseHash, start)
			if size+int64(n) <= keepLimit {
				kept.Write(buf[:n])
			}
			size += int64(n)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, sum, nil, streamError(ctx, err)
		}
	}
	copy(sum[:], h.Sum(nil))
	if size > keepLimit {
		return size, sum, nil, nil
	}
	return size, sum, kept.Bytes(), nil
}

// extractContext unpacks a build context tar stream (plain or compressed)
// into dir, which must exist and be empty. Entries are refused when their
// name has ".." elements, when a hard link points outside the context, or
// when they are not files, directories or links; writes never follow a
// symbolic link out of dir. budget bounds the expanded size (413 past it).
func extractContext(ctx context.Context, r io.Reader, dir string, budget *sizelimit.Budget) error {
	src, err := budget.Decompress(ctx, r)
	if err != nil {
		return err
	}
	defer src.Close()
	tr := tar.NewReader(src)
	buf := make([]byte, 256<<10)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return streamError(ctx, err)
		}
		name, err := entryName(hdr.Name)
		if err != nil {
			return err
		}
		if name == "." {
			continue
		}
		parent, err := securejoin.SecureJoin(dir, path.Dir(name))
		if err != nil {
			return err
		}
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return core.InvalidArgument(contextField, fmt.Errorf("entry %q: %w", hdr.Name, err))
		}
		target := filepath.Join(parent, path.Base(name))
		mode := os.FileMode(hdr.Mode).Perm() | os.FileMode(hdr.Mode)&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if fi, err := os.Lstat(target); err == nil && !fi.IsDir() {
				if err := os.Remove(target); err != nil {
					return err
				}
			}
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
			if err := os.Chmod(target, mode|0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := writeFile(ctx, target, tr, mode, buf); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := replaceWith(target, func() error { return os.Symlink(hdr.Linkname, target) }); err != nil {
				return err
			}
		case tar.TypeLink:
			linked, err := entryName(hdr.Linkname)
			if err != nil {
				return err
			}
			from, err := securejoin.SecureJoin(dir, linked)
			if err != nil {
				return err
			}
			fi, err := os.Lstat(from)
			if err != nil || !fi.Mode().IsRegular() {
				return core.InvalidArgument(contextField, fmt.Errorf("hard link %q points to %q, which is not a file earlier in the context", hdr.Name, hdr.Linkname))
			}
			if err := replaceWith(target, func() error { return os.Link(from, target) }); err != nil {
				return err
			}
		default:
			return core.InvalidArgument(contextField, fmt.Errorf("entry %q has an unsupported type %q", hdr.Name, hdr.Typeflag))
		}
	}
}

// entryName cleans a tar entry name into a slash path relative to the
// context root, refusing names with ".." elements.
func entryName(raw string) (string, error) {
	if raw == "" || strings.ContainsRune(raw, 0) {
		return "", core.InvalidArgument(contextField, fmt.Errorf("entry name %q is invalid", raw))
	}
	// A leading slash is dropped, as tar does (Podman's client sends the
	// files of secrets that way too).
	raw = strings.TrimLeft(raw, "/")
	if raw == "" {
		return ".", nil
	}
	for _, part := range strings.Split(raw, "/") {
		if part == ".." {
			return "", core.InvalidArgument(contextField, fmt.Errorf("entry %q leaves the context", raw))
		}
	}
	return path.Clean(raw), nil
}

// writeFile creates target with r's content, replacing whatever was
// there (a file of that name is replaced, not rewritten, so that a hard
// link to it keeps its content, as the index assumes).
func writeFile(ctx context.Context, target string, r io.Reader, mode os.FileMode, buf []byte) error {
	if err := os.RemoveAll(target); err != nil {
		return err
	}
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, mode)
	if err != nil {
		return err
	}
	_, err = io.CopyBuffer(f, r, buf)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return streamError(ctx, err)
	}
	return os.Chmod(target, mode)
}

// replaceWith removes whatever is at target, then creates it with create.
func replaceWith(target string, create func() error) error {
	if err := os.RemoveAll(target); err != nil {
		return err
	}
	return create()
}
