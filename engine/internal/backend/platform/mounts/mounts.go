// Package mounts finds and removes mounts by where they are, from the
// kernel's own table (/proc/self/mountinfo). The engine's mount records
// (containers/storage's mount counts, a container's record) can disagree
// with the kernel after a kill -9 between a mount and its record; code that
// is about to delete a directory asks the kernel instead.
package mounts

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// Under lists the mount points at or below dir, deepest first, that keep
// passes (nil keeps all); keep gets the path relative to dir ("." for dir).
func Under(dir string, keep func(rel string) bool) ([]string, error) {
	dir = filepath.Clean(dir)
	infos, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		return nil, fmt.Errorf("read the mount table: %w", err)
	}
	var out []string
	for _, mi := range infos {
		rel, err := filepath.Rel(dir, mi.Mountpoint)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		if keep == nil || keep(rel) {
			out = append(out, mi.Mountpoint)
		}
	}
	// Deepest first, so that a mount is gone before the one it sits on; a
	// path mounted twice appears twice and is unmounted twice.
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, nil
}

// UnmountUnder detaches every mount at or below dir that keep passes (nil:
// all), deepest first, and answers how many it detached. A mount that is
// gone already is not an error.
func UnmountUnder(dir string, keep func(rel string) bool) (int, error) {
	mps, err := Under(dir, keep)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, mp := range mps {
		err := unix.Unmount(mp, unix.MNT_DETACH)
		switch {
		case err == nil:
			n++
		case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
		default:
			errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
		}
	}
	return n, errors.Join(errs...)
}

// IsMountPoint reports whether dir itself is a mount point.
func IsMountPoint(dir string) bool {
	mps, err := Under(dir, func(rel string) bool { return rel == "." })
	return err == nil && len(mps) > 0
}
