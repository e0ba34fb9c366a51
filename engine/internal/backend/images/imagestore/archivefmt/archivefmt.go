// Package archivefmt reads the outer tar of image archives that clients
// upload: it tells a docker-archive from an oci-archive and unpacks an OCI
// layout safely. It is kept apart from the store so that its parsers of
// untrusted input can be tested and fuzzed on their own.
package archivefmt

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/berth-project/berth/engine/internal/core"
)

// Format is what an image archive turned out to be.
type Format int

// The archive formats Sniff tells apart.
const (
	Unknown Format = iota
	Docker
	OCI
)

// Sniff reads the tar headers (skipping file contents) and tells a
// docker-archive (manifest.json) from an oci-archive (index.json). A file
// that is not a complete tar is an invalid archive.
func Sniff(path string) (Format, error) {
	f, err := os.Open(path)
	if err != nil {
		return Unknown, fmt.Errorf("opening archive: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return Unknown, fmt.Errorf("opening archive: %w", err)
	}
	tr := tar.NewReader(f)
	var hasManifest, hasIndex bool
	entries := 0
	var contentSize int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Unknown, core.InvalidArgument("archive", fmt.Errorf("not a valid tar archive: %w", err))
		}
		entries++
		// Members cannot hold more than the archive does: a sparse member
		// that expands beyond it is refused before anything reads it.
		if contentSize += hdr.Size; hdr.Size < 0 || contentSize > info.Size() {
			return Unknown, core.InvalidArgument("archive", fmt.Errorf("member %q claims more data than the archive holds (sparse members are not accepted)", hdr.Name))
		}
		switch filepath.Clean(hdr.Name) {
		case "manifest.json":
			hasManifest = true
		case "index.json":
			hasIndex = true
		}
	}
	switch {
	case entries == 0:
		return Unknown, core.InvalidArgument("archive", errors.New("the archive is empty or not a tar archive"))
	case hasManifest:
		return Docker, nil
	case hasIndex:
		return OCI, nil
	}
	return Unknown, core.InvalidArgument("archive", errors.New("neither a docker-archive (no manifest.json) nor an oci-archive (no index.json)"))
}

// UnpackLayout unpacks an OCI layout archive: only directories and regular
// files with local, relative names are written; links, devices and names
// escaping dir make the archive invalid.
func UnpackLayout(ctx context.Context, path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("opening archive: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("opening archive: %w", err)
	}
	tr := tar.NewReader(f)
	var written int64
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return core.InvalidArgument("archive", fmt.Errorf("not a valid tar archive: %w", err))
		}
		name := filepath.Clean(strings.TrimPrefix(hdr.Name, "./"))
		if name == "." {
			continue
		}
		if !filepath.IsLocal(name) {
			return core.InvalidArgument("archive", fmt.Errorf("entry %q escapes the archive", hdr.Name))
		}
		target := filepath.Join(dir, name)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
				return err
			}
			if written += hdr.Size; hdr.Size < 0 || written > info.Size() {
				return core.InvalidArgument("archive", fmt.Errorf("entry %q claims more data than the archive holds", hdr.Name))
			}
			out, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return core.InvalidArgument("archive", fmt.Errorf("entry %q: %w", hdr.Name, err))
			}
			_, err = io.Copy(out, io.LimitReader(tr, hdr.Size))
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EIO) {
					return err
				}
				return core.InvalidArgument("archive", fmt.Errorf("entry %q: %w", hdr.Name, err))
			}
		default:
			return core.InvalidArgument("archive", fmt.Errorf("entry %q: an OCI layout holds only files and directories", hdr.Name))
		}
	}
}
