package files

import (
	"os"

	"golang.org/x/sys/unix"
)

// writebackChunk is how much a write lets pile up in the page cache before it asks the
// kernel to start writing it to disk.
const writebackChunk = 8 << 20

// writeback writes to a file and, every writebackChunk bytes, starts the disk writeback
// of what came before (sync_file_range, without waiting), so that the fsync at the end
// finds little left to do and receiving the body overlaps with the disk's work. It waits
// for the chunk before last, which bounds the dirty pages one upload can pile up.
type writeback struct {
	f       *os.File
	written int64
	started int64 // bytes whose writeback has been started
}

func (w *writeback) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.written += int64(n)
	if w.written-w.started >= writebackChunk {
		fd := int(w.f.Fd())
		_ = unix.SyncFileRange(fd, w.started, w.written-w.started, unix.SYNC_FILE_RANGE_WRITE)
		w.started = w.written
	}
	return n, err
}
