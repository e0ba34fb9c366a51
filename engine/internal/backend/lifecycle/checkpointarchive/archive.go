// Package checkpointarchive writes and reads the one-file form of a
// container checkpoint that "podman container checkpoint --export" makes
// and "restore --import" takes: CRIU's images, the container's
// configuration, its root filesystem changes and its volumes, in a tar.
//
// Layout (every entry at the top, or one level below checkpoint/ and
// volumes/):
//
//	config.dump         the container's configuration (Config, JSON)
//	checkpoint/NAME     CRIU's images and runc's descriptors (flat)
//	rootfs-diff.tar     the container layer's changes (a layer diff with whiteouts)
//	volumes/N.tar       the content of the volume mounted at Config.Volumes[N].Dest
//
// An archive comes from a client, so Read trusts nothing: each entry must be
// one of the above, a plain file or directory, and stay where it says.
package checkpointarchive

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/platform/sizelimit"
	"github.com/berth-project/berth/engine/internal/core"
)

// Entry names of the archive.
const (
	ConfigFile    = "config.dump"
	CheckpointDir = "checkpoint"
	RootfsDiff    = "rootfs-diff.tar"
	VolumesDir    = "volumes"
	// inventory is the image every CRIU dump has.
	inventory = "inventory.img"
)

// Version is the layout version Write produces and Read accepts.
const Version = 1

// Config is config.dump: what the importing engine needs to recreate the
// container.
type Config struct {
	Version int
	// ID and Name of the checkpointed container.
	ID, Name string
	// Image as requested, ImageID as resolved on the exporting engine.
	Image, ImageID string
	Spec           core.ContainerSpec
	// Networks are the container's addresses when it was checkpointed.
	Networks       map[string]core.PerNetworkOptions `json:",omitempty"`
	Volumes        []Volume                          `json:",omitempty"`
	CheckpointedAt time.Time
	// HasRootfsDiff tells that rootfs-diff.tar is in the archive.
	HasRootfsDiff bool
}

// Volume is a volume the container mounts; Included tells whether its
// content is in the archive (volumes/N.tar, N its index in Config.Volumes).
type Volume struct {
	Name      string
	Dest      string
	Anonymous bool `json:",omitempty"`
	Included  bool `json:",omitempty"`
}

// Contents is what Write puts into an archive.
type Contents struct {
	Config Config
	// CheckpointDir holds CRIU's images (files only).
	CheckpointDir string
	// RootfsDiff, when set, writes the container layer's diff.
	RootfsDiff func(io.Writer) error
	// Volume writes the content of Config.Volumes[i] (Included ones).
	Volume func(i int, w io.Writer) error
}

// Write writes an uncompressed checkpoint archive to w. Large entries of
// unknown size (the layer diff, volumes) are spooled to a temporary file
// first, as tar needs each entry's size up front.
func Write(w io.Writer, c Contents) error {
	tw := tar.NewWriter(w)
	buf := make([]byte, copyBufferSize)
	c.Config.Version = Version
	c.Config.HasRootfsDiff = c.RootfsDiff != nil
	cfg, err := json.Marshal(c.Config)
	if err != nil {
		return err
	}
	now := time.Now()
	if err := writeBytes(tw, ConfigFile, cfg, now); err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: CheckpointDir + "/", Typeflag: tar.TypeDir, Mode: 0o700, ModTime: now}); err != nil {
		return err
	}
	entries, err := os.ReadDir(c.CheckpointDir)
	if err != nil {
		return err
	}
	for _, de := range entries {
		if !de.Type().IsRegular() {
			continue
		}
		if err := writeFile(tw, CheckpointDir+"/"+de.Name(), filepath.Join(c.CheckpointDir, de.Name()), buf); err != nil {
			return err
		}
	}
	if c.RootfsDiff != nil {
		if err := writeSpooled(tw, RootfsDiff, now, c.RootfsDiff, buf); err != nil {
			return fmt.Errorf("root filesystem changes: %w", err)
		}
	}
	for i, v := range c.Config.Volumes {
		if !v.Included {
			continue
		}
		if err := writeSpooled(tw, VolumesDir+"/"+strconv.Itoa(i)+".tar", now, func(w io.Writer) error { return c.Volume(i, w) }, buf); err != nil {
			return fmt.Errorf("volume %s: %w", v.Name, err)
		}
	}
	return tw.Close()
}

func writeBytes(tw *tar.Writer, name string, data []byte, mod time.Time) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o600, Size: int64(len(data)), ModTime: mod}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

// copyBufferSize is the buffer the archive's contents are copied through:
// CRIU's memory pages are most of an archive (64 MiB for a container
// holding as much), and io.Copy's 32 KiB means a write to the client, or
// to the unpacked file, per 32 KiB.
const copyBufferSize = 1 << 20

// copyBuffer copies src to dst through buf, even where dst could read
// from src itself (an *os.File's ReadFrom falls back to 32 KiB reads from
// anything but a file or socket).
func copyBuffer(dst io.Writer, src io.Reader, buf []byte) (int64, error) {
	return io.CopyBuffer(struct{ io.Writer }{dst}, src, buf)
}

func writeFile(tw *tar.Writer, name, path string, buf []byte) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o600, Size: fi.Size(), ModTime: fi.ModTime()}); err != nil {
		return err
	}
	_, err = copyBuffer(tw, f, buf)
	return err
}

func writeSpooled(tw *tar.Writer, name string, mod time.Time, fill func(io.Writer) error, buf []byte) error {
	f, err := os.CreateTemp("", "berth-checkpoint-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := fill(f); err != nil {
		return err
	}
	size, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o600, Size: size, ModTime: mod}); err != nil {
		return err
	}
	_, err = copyBuffer(tw, io.LimitReader(f, size), buf)
	return err
}

// Archive is an archive Read unpacked into a directory.
type Archive struct {
	Config Config
	// Dir is where it was unpacked: Dir/checkpoint holds CRIU's images.
	Dir string
}

// CheckpointPath is the directory of CRIU's images.
func (a *Archive) CheckpointPath() string { return filepath.Join(a.Dir, CheckpointDir) }

// RootfsDiffPath is the layer diff, "" when the archive has none.
func (a *Archive) RootfsDiffPath() string {
	if !a.Config.HasRootfsDiff {
		return ""
	}
	return filepath.Join(a.Dir, RootfsDiff)
}

// VolumePath is the content of Config.Volumes[i], "" when not included.
func (a *Archive) VolumePath(i int) string {
	if i < 0 || i >= len(a.Config.Volumes) || !a.Config.Volumes[i].Included {
		return ""
	}
	return filepath.Join(a.Dir, VolumesDir, strconv.Itoa(i)+".tar")
}

// invalid is a 400 naming what is wrong with the archive.
func invalid(format string, args ...any) error {
	return core.InvalidArgument("import", fmt.Errorf(format, args...))
}

// Read unpacks the checkpoint archive r (plain, gzip or zstd) into dir,
// which must exist and be empty, within budget. Anything that is not a
// checkpoint archive of this layout, a corrupt one or one whose entries
// escape is an InvalidArgument naming the entry; an archive larger than the
// budget is core.ErrTooLarge.
func Read(ctx context.Context, r io.Reader, dir string, budget *sizelimit.Budget) (*Archive, error) {
	rc, err := budget.Decompress(ctx, r)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	buf := make([]byte, copyBufferSize)
	seen := map[string]bool{}
	last := ""
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if errors.Is(err, core.ErrTooLarge) {
				return nil, err
			}
			if last == "" {
				return nil, invalid("not a checkpoint archive: %v", err)
			}
			return nil, invalid("corrupt checkpoint archive after entry %q: %v", last, err)
		}
		name, err := entryName(h)
		if err != nil {
			return nil, err
		}
		last = h.Name
		if seen[name] {
			return nil, invalid("entry %q appears twice in the checkpoint archive", h.Name)
		}
		seen[name] = true
		target := filepath.Join(dir, filepath.FromSlash(name))
		if h.Typeflag == tar.TypeDir {
			if err := os.Mkdir(target, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return nil, err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, err
		}
		n, err := copyBuffer(f, tr, buf)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			if errors.Is(err, core.ErrTooLarge) {
				return nil, err
			}
			return nil, invalid("corrupt checkpoint archive: entry %q: %v", h.Name, err)
		}
		if n != h.Size {
			return nil, invalid("corrupt checkpoint archive: entry %q is truncated", h.Name)
		}
	}
	if !seen[ConfigFile] {
		return nil, invalid("not a checkpoint archive: it has no %s", ConfigFile)
	}
	data, err := os.ReadFile(filepath.Join(dir, ConfigFile))
	if err != nil {
		return nil, err
	}
	a := &Archive{Dir: dir}
	if err := json.Unmarshal(data, &a.Config); err != nil {
		return nil, invalid("entry %q of the checkpoint archive: %v", ConfigFile, err)
	}
	if a.Config.Version != Version {
		return nil, invalid("entry %q: checkpoint archive version %d, this engine reads version %d", ConfigFile, a.Config.Version, Version)
	}
	if !seen[CheckpointDir+"/"+inventory] {
		return nil, invalid("not a checkpoint archive: it has no %s/%s (CRIU's images)", CheckpointDir, inventory)
	}
	if a.Config.HasRootfsDiff != seen[RootfsDiff] {
		return nil, invalid("entry %q: %s says HasRootfsDiff=%t", RootfsDiff, ConfigFile, a.Config.HasRootfsDiff)
	}
	for name := range seen {
		rest, ok := strings.CutPrefix(name, VolumesDir+"/")
		if !ok || rest == "" {
			continue
		}
		i, _ := strconv.Atoi(strings.TrimSuffix(rest, ".tar"))
		if i >= len(a.Config.Volumes) || !a.Config.Volumes[i].Included {
			return nil, invalid("entry %q is a volume %s does not list", name, ConfigFile)
		}
	}
	for i, v := range a.Config.Volumes {
		if v.Included && !seen[VolumesDir+"/"+strconv.Itoa(i)+".tar"] {
			return nil, invalid("entry %q (volume %s) is missing", VolumesDir+"/"+strconv.Itoa(i)+".tar", v.Name)
		}
		if v.Dest == "" || !strings.HasPrefix(v.Dest, "/") {
			return nil, invalid("entry %q: volume %d has no absolute destination", ConfigFile, i)
		}
	}
	return a, nil
}

// entryName checks one header: a plain file or directory whose name is one
// of the layout's; it returns the name without "./" and trailing slash.
func entryName(h *tar.Header) (string, error) {
	name := strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
	if !fs.ValidPath(name) || name == "." || strings.Contains(name, "\\") {
		return "", invalid("entry %q escapes the checkpoint archive", h.Name)
	}
	switch h.Typeflag {
	case tar.TypeDir:
		if name == CheckpointDir || name == VolumesDir {
			return name, nil
		}
		return "", invalid("entry %q is not part of a checkpoint archive", h.Name)
	case tar.TypeReg:
	default:
		return "", invalid("entry %q is not a regular file or directory (type %q)", h.Name, h.Typeflag)
	}
	if h.Size < 0 {
		return "", invalid("entry %q has a negative size", h.Name)
	}
	switch dirName, base, nested := strings.Cut(name, "/"); {
	case !nested && (name == ConfigFile || name == RootfsDiff):
		return name, nil
	case nested && dirName == CheckpointDir && !strings.Contains(base, "/"):
		return name, nil
	case nested && dirName == VolumesDir && validVolumeEntry(base):
		return name, nil
	}
	return "", invalid("entry %q is not part of a checkpoint archive", h.Name)
}

// validVolumeEntry accepts N.tar for a small decimal N.
func validVolumeEntry(base string) bool {
	n, ok := strings.CutSuffix(base, ".tar")
	if !ok || n == "" || len(n) > 4 {
		return false
	}
	i, err := strconv.Atoi(n)
	return err == nil && i >= 0 && strconv.Itoa(i) == n
}
