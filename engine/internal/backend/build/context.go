package build

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	securejoin "github.com/cyphar/filepath-securejoin"
	"golang.org/x/sys/unix"

	"github.com/berth-project/berth/engine/internal/backend/sizelimit"
	"github.com/berth-project/berth/engine/internal/core"
)

// contextField is the field named by errors about the context's content.
const contextField = "context"

// buildContext is a build context unpacked in (or, for local builds, at)
// dir. sums holds the SHA-256 of each regular file computed while it was
// unpacked (by slash path relative to dir); files not in it are hashed on
// demand.
type buildContext struct {
	dir  string
	sums map[string][sha256.Size]byte
}

// extractContext unpacks a build context tar stream (plain or compressed)
// into dir, which must exist and be empty. Entries are refused when their
// name has ".." elements, when a hard link points outside the context, or
// when they are not files, directories or links; writes never follow a
// symbolic link out of dir. budget bounds the expanded size (413 past it).
func extractContext(ctx context.Context, r io.Reader, dir string, budget *sizelimit.Budget, ph *phases) (*buildContext, error) {
	src, err := budget.Decompress(ctx, r)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	bc := &buildContext{dir: dir, sums: map[string][sha256.Size]byte{}}
	tr := tar.NewReader(src)
	buf := make([]byte, 256<<10)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return bc, nil
		}
		if err != nil {
			if errors.Is(err, core.ErrTooLarge) || ctx.Err() != nil {
				return nil, err
			}
			return nil, core.InvalidArgument(contextField, fmt.Errorf("reading tar: %w", err))
		}
		name, err := entryName(hdr.Name)
		if err != nil {
			return nil, err
		}
		if name == "." {
			continue
		}
		parent, err := securejoin.SecureJoin(dir, path.Dir(name))
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return nil, err
		}
		target := filepath.Join(parent, path.Base(name))
		mode := os.FileMode(hdr.Mode).Perm() | os.FileMode(hdr.Mode)&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if fi, err := os.Lstat(target); err == nil && !fi.IsDir() {
				if err := os.Remove(target); err != nil {
					return nil, err
				}
			}
			if err := os.MkdirAll(target, 0o755); err != nil {
				return nil, err
			}
			if err := os.Chmod(target, mode|0o700); err != nil {
				return nil, err
			}
		case tar.TypeReg:
			sum, err := writeFile(target, tr, mode, buf, ph)
			if err != nil {
				return nil, err
			}
			bc.sums[name] = sum
		case tar.TypeSymlink:
			if err := replaceWith(target, func() error { return os.Symlink(hdr.Linkname, target) }); err != nil {
				return nil, err
			}
		case tar.TypeLink:
			linked, err := entryName(hdr.Linkname)
			if err != nil {
				return nil, err
			}
			from, err := securejoin.SecureJoin(dir, linked)
			if err != nil {
				return nil, err
			}
			fi, err := os.Lstat(from)
			if err != nil || !fi.Mode().IsRegular() {
				return nil, core.InvalidArgument(contextField, fmt.Errorf("hard link %q points to %q, which is not a file earlier in the context", hdr.Name, hdr.Linkname))
			}
			if err := replaceWith(target, func() error { return os.Link(from, target) }); err != nil {
				return nil, err
			}
			if sum, ok := bc.sums[linked]; ok {
				bc.sums[name] = sum
			}
		default:
			return nil, core.InvalidArgument(contextField, fmt.Errorf("entry %q has an unsupported type %q", hdr.Name, hdr.Typeflag))
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

// writeFile creates (or replaces) a regular file with r's content and
// returns the content's SHA-256.
func writeFile(target string, r io.Reader, mode os.FileMode, buf []byte, ph *phases) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	if fi, err := os.Lstat(target); err == nil && (fi.IsDir() || fi.Mode()&os.ModeSymlink != 0) {
		if err := os.RemoveAll(target); err != nil {
			return sum, err
		}
	}
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_NOFOLLOW, mode)
	if err != nil {
		return sum, err
	}
	h := sha256.New()
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			start := time.Now()
			h.Write(buf[:n])
			ph.since(phaseHash, start)
			start = time.Now()
			_, err = f.Write(buf[:n])
			ph.since(phaseExtract, start)
			if err != nil {
				break
			}
		}
		if rerr != nil {
			if rerr != io.EOF {
				err = rerr
			}
			break
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, core.ErrTooLarge) || errors.Is(err, context.Canceled) {
		return sum, err
	}
	if err != nil {
		return sum, core.InvalidArgument(contextField, fmt.Errorf("reading %s: %w", filepath.Base(target), err))
	}
	if err := os.Chmod(target, mode); err != nil {
		return sum, err
	}
	copy(sum[:], h.Sum(nil))
	return sum, nil
}

// replaceWith removes whatever is at target, then creates it with create.
func replaceWith(target string, create func() error) error {
	if err := os.RemoveAll(target); err != nil {
		return err
	}
	return create()
}
