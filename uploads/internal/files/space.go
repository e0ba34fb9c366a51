package files

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// FullError refuses a write because the data directory's file system is (nearly) full.
// It wraps syscall.ENOSPC, like the file system's own refusal.
type FullError struct {
	Free, Headroom int64
}

func (e *FullError) Error() string {
	return fmt.Sprintf("the data directory is full: %d bytes free, and writes leave %d bytes (--disk-headroom) for deletes", e.Free, e.Headroom)
}

// Unwrap makes errors.Is(err, syscall.ENOSPC) true.
func (e *FullError) Unwrap() error { return syscall.ENOSPC }

// reserveFile is the file in the data directory that holds the headroom.
const reserveFile = "headroom.reserve"

// Space keeps headroom in the data directory, so that deletes can free space on a full
// disk: writes are refused while less than the headroom is free, and a reserve file of
// the headroom's size is kept, to be given up when a delete finds the disk full anyway (a
// SQLite database in the data directory needs room to write even to delete; another
// process may have filled the disk) and made again once there is room.
type Space struct {
	dir      string
	headroom int64
	mu       sync.Mutex
}

// NewSpace watches dataDir's file system; headroom 0 disables the checks.
func NewSpace(dataDir string, headroom int64) *Space {
	return &Space{dir: dataDir, headroom: headroom}
}

// Free is the space left for unprivileged writers in the data directory's file system.
func (s *Space) Free() (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(s.dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", s.dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// Admit refuses (*FullError) a write of size bytes (0 when unknown) that would leave less
// than the headroom free.
func (s *Space) Admit(size int64) error {
	if s == nil || s.headroom == 0 {
		return nil
	}
	free, err := s.Free()
	if err != nil {
		return err
	}
	if free-max(size, 0) < s.headroom {
		return &FullError{Free: free, Headroom: s.headroom}
	}
	return nil
}

// Check is the readiness check: it fails while writes are refused for want of space.
func (s *Space) Check(context.Context) error { return s.Admit(0) }

// Release gives up the reserve file; it reports whether there was one.
func (s *Space) Release() bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return os.Remove(filepath.Join(s.dir, reserveFile)) == nil
}

// Refill makes the reserve file again when it is missing and the file system has room
// for it and the headroom besides.
func (s *Space) Refill() error {
	if s == nil || s.headroom == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := filepath.Join(s.dir, reserveFile)
	if fi, err := os.Stat(p); err == nil && fi.Size() == s.headroom {
		return nil
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	free, err := s.Free()
	if err != nil {
		return err
	}
	if free < 2*s.headroom {
		return nil
	}
	tmp := p + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = unix.Fallocate(int(f.Fd()), 0, 0, s.headroom)
	if errors.Is(err, unix.EOPNOTSUPP) {
		err = writeZeros(f, s.headroom)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("make the headroom reserve: %w", err)
	}
	return nil
}

func writeZeros(f *os.File, n int64) error {
	buf := make([]byte, 1<<20)
	for n > 0 {
		k := min(n, int64(len(buf)))
		if _, err := f.Write(buf[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}
