package volumes

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/containers/storage/pkg/archive"

	"github.com/berth-project/berth/engine/internal/backend/platform/sizelimit"
	"github.com/berth-project/berth/engine/internal/core"
)

// importPrefix names the staging directories of imports, beside _data.
const importPrefix = ".import-"

// Export writes the volume's content as an uncompressed tar (paths relative
// to the volume's root, owners and modes kept).
func (s *Store) Export(ctx context.Context, name string, w io.Writer) error {
	v, err := s.get(ctx, name)
	if err != nil {
		return err
	}
	rc, err := archive.TarWithOptions(v.Mountpoint, &archive.TarOptions{Compression: archive.Uncompressed})
	if err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	defer rc.Close()
	if _, err := io.Copy(w, rc); err != nil {
		return fmt.Errorf("volume %s: exporting: %w", name, err)
	}
	return nil
}

// Import merges a tar into the volume. The tar is checked entry by entry and
// unpacked into a staging directory beside the volume's data first; only a
// tar that unpacked whole is moved in, entry by entry, over what the volume
// holds. A crash in between leaves a staging directory, which Open deletes.
func (s *Store) Import(ctx context.Context, name string, r io.Reader) error {
	// The client going away stops the copy, never a half-done merge.
	r = sizelimit.New(s.maxImport, "volume archive").Reader(ctx, r)
	ctx = context.WithoutCancel(ctx)
	v, err := s.get(ctx, name)
	if err != nil {
		return err
	}
	staging, err := os.MkdirTemp(filepath.Dir(v.Mountpoint), importPrefix)
	if err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	defer os.RemoveAll(staging)
	pr, pw := io.Pipe()
	checked := make(chan error, 1)
	go func() {
		err := checkTar(r, pw)
		pw.CloseWithError(err)
		checked <- err
	}()
	untarErr := archive.Untar(pr, staging, &archive.TarOptions{Compression: archive.Uncompressed})
	if untarErr == nil {
		// Let the check read the tar to its end (and the padding after it).
		_, _ = io.Copy(io.Discard, pr)
	}
	pr.CloseWithError(errors.New("import stopped"))
	if err := <-checked; err != nil {
		return err
	}
	if untarErr != nil {
		return core.InvalidArgument("body", fmt.Errorf("not an importable tar: %w", untarErr))
	}
	return mergeInto(staging, v.Mountpoint)
}

// checkTar copies a tar stream from r to w, refusing a malformed one and any
// entry (or hard link target) that would land outside the volume.
func checkTar(r io.Reader, w io.Writer) error {
	counted := &countingReader{r: r}
	tr := tar.NewReader(counted)
	tw := tar.NewWriter(w)
	entries := 0
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return core.InvalidArgument("body", fmt.Errorf("not a tar archive: %w", err))
		}
		entries++
		for _, p := range []string{hdr.Name, linkTarget(hdr)} {
			if p != "" && escapes(p) {
				return core.InvalidArgument("body", fmt.Errorf("tar entry %q points outside the volume", p))
			}
		}
		switch hdr.Typeflag {
		case tar.TypeReg, tar.TypeDir, tar.TypeSymlink, tar.TypeLink, tar.TypeFifo, tar.TypeXGlobalHeader:
		default:
			return core.InvalidArgument("body", fmt.Errorf("tar entry %q: type %q is not importable", hdr.Name, hdr.Typeflag))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("import: %w", err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return core.InvalidArgument("body", fmt.Errorf("tar entry %q is truncated", hdr.Name))
			}
			return fmt.Errorf("import: %w", err)
		}
	}
	// An archive of an empty volume (what Export writes for one) is just
	// the end-of-archive marker, two zero blocks; less than that is no tar.
	if entries == 0 && counted.n < 2*512 {
		return core.InvalidArgument("body", errors.New("not a tar archive: no entries"))
	}
	return tw.Close()
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// linkTarget is a hard link's target (a path inside the archive); symbolic
// links may point anywhere, as they resolve inside the container.
func linkTarget(hdr *tar.Header) string {
	if hdr.Typeflag == tar.TypeLink {
		return hdr.Linkname
	}
	return ""
}

// escapes reports whether an archive path may leave the archive's root: it
// has a ".." component (absolute paths are read relative to the root).
func escapes(p string) bool {
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return true
		}
	}
	return false
}

// mergeInto moves every entry of src into dst: a directory present in both
// is merged, anything else in dst is replaced.
func mergeInto(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		from, to := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		fi, err := os.Lstat(to)
		if err == nil && fi.IsDir() && e.IsDir() {
			if err := mergeInto(from, to); err != nil {
				return err
			}
			if st, err := os.Lstat(from); err == nil {
				os.Chmod(to, st.Mode().Perm())
			}
			continue
		}
		if err == nil {
			if err := os.RemoveAll(to); err != nil {
				return err
			}
		}
		if err := os.Rename(from, to); err != nil {
			return err
		}
	}
	return nil
}
