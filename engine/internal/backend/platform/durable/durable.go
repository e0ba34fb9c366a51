// Package durable writes files that survive a crash whole or not at all:
// the stores that keep small files of their own (secret data, the artifact
// index, quadlet units) write through it, so that a kill -9 leaves either
// the old file or the new one, never half of one.
package durable

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// WriteFile writes data to a temporary file beside path (named
// tempPrefix, then random characters: the store's Open removes what a
// crash left of one), with mode perm, syncs it, renames it over path and
// syncs the directory. On failure nothing is left but the old file.
func WriteFile(path string, data []byte, perm os.FileMode, tempPrefix string) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), tempPrefix)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		// The temporary file's name means nothing to the caller.
		return fmt.Errorf("writing the data: %w", errors.Unwrap(err))
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir flushes a directory's entries, so that a rename or a removal in
// it survives a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Sweep splits the entries of dir into those that one of recs names (key
// gives the name a record stands for) and those none does: what a crash
// left between writing a file and recording it, or between removing a
// record and its file, for the store's Open to remove.
func Sweep[R any](dir string, recs []R, key func(R) string) (recorded, unrecorded []string, err error) {
	known := make(map[string]bool, len(recs))
	for _, r := range recs {
		known[key(r)] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		if known[e.Name()] {
			recorded = append(recorded, e.Name())
		} else {
			unrecorded = append(unrecorded, e.Name())
		}
	}
	return recorded, unrecorded, nil
}
