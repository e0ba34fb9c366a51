package stats

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/berth-project/berth/engine/internal/backend/execution/cgroups"
)

// maxHeldCgroups bounds how many cgroups' files Handles keeps open (seven
// descriptors each); past it a cgroup's files are opened for each read.
const maxHeldCgroups = 1024

// Handles keeps the v2 control files of the cgroups sampled open between
// samples and reads them again from offset 0, which regenerates them: a
// sample then costs one pread per file instead of open, fstat, reads and
// close (a path walk in cgroupfs each time). In the host lab's emulated VM
// the opens were a large part of a stats request over 50 containers.
// A cgroup removed and made again (a container restarted) leaves the old
// descriptors reading ENODEV; they are then opened anew. Forget closes a
// cgroup's files (its container stopped or went away).
type Handles struct {
	mu   sync.Mutex
	sets map[string]*handleSet // cgroup directory -> its open files
}

type handleSet struct {
	mu    sync.Mutex
	files map[string]heldFile
	// forgotten: Forget closed the set while a read held it; that read
	// opens the file for itself.
	forgotten bool
}

// heldFile is an open control file and its descriptor's number, taken
// once: os.File.Fd switches the descriptor to blocking mode with fcntl
// calls each time it is asked, which doubled the system calls of a sample.
type heldFile struct {
	f  *os.File
	fd int
}

// NewHandles returns an empty Handles.
func NewHandles() *Handles {
	return &Handles{sets: map[string]*handleSet{}}
}

// files returns a reader of the control files of the cgroup at dir: a
// file's contents, in the buffer given where they fit (a larger file gets a
// larger buffer). The set of held files is looked up once for all the files
// of a sample.
func (h *Handles) files(dir string) func(name string, buf []byte) ([]byte, error) {
	set := h.set(dir)
	return func(name string, buf []byte) ([]byte, error) {
		if set == nil {
			return os.ReadFile(filepath.Join(dir, name))
		}
		return set.read(dir, name, buf)
	}
}

// read reads the control file name of the cgroup at dir through the
// descriptor the set holds, opening it the first time.
func (set *handleSet) read(dir, name string, buf []byte) ([]byte, error) {
	set.mu.Lock()
	defer set.mu.Unlock()
	if set.forgotten {
		return os.ReadFile(filepath.Join(dir, name))
	}
	if h, ok := set.files[name]; ok {
		data, err := preadAll(h, buf)
		if err == nil {
			return data, nil
		}
		// ENODEV: the cgroup was removed (and maybe made again).
		h.f.Close()
		delete(set.files, name)
	}
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return nil, err
	}
	h := heldFile{f: f, fd: int(f.Fd())}
	data, err := preadAll(h, buf)
	if err != nil {
		f.Close()
		return nil, err
	}
	set.files[name] = h
	return data, nil
}

func (h *Handles) set(dir string) *handleSet {
	h.mu.Lock()
	defer h.mu.Unlock()
	set := h.sets[dir]
	if set == nil {
		if len(h.sets) >= maxHeldCgroups {
			return nil
		}
		set = &handleSet{files: map[string]heldFile{}}
		h.sets[dir] = set
	}
	return set
}

// Forget closes the files held for the cgroup at dir.
func (h *Handles) Forget(dir string) {
	h.mu.Lock()
	set := h.sets[dir]
	delete(h.sets, dir)
	h.mu.Unlock()
	if set == nil {
		return
	}
	set.mu.Lock()
	defer set.mu.Unlock()
	set.forgotten = true
	for name, h := range set.files {
		h.f.Close()
		delete(set.files, name)
	}
}

// Forget closes the files r's Handles hold for the cgroup at cgroupPath.
func (r Reader) Forget(cgroupPath string) {
	if r.Handles != nil {
		r.Handles.Forget(filepath.Join(cgroups.At(r.Root).Root(), cgroupPath))
	}
}

// Held reports how many cgroups have files held open.
func (h *Handles) Held() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.sets)
}

// preadAll reads h from offset 0 to its end into buf (or a larger buffer
// when buf is too small; a nil or empty buf gets a page). A read that does
// not fill the buffer has reached the end (a control file is generated whole and handed
// out up to the size asked for; a regular file ends there too), so a file
// that fits takes one pread instead of a second one that reads nothing
// (what os.File.ReadAt does to see the end).
func preadAll(h heldFile, buf []byte) ([]byte, error) {
	if len(buf) == 0 {
		buf = make([]byte, 4096)
	}
	n := 0
	for {
		m, err := syscall.Pread(h.fd, buf[n:], int64(n))
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "pread", Path: h.f.Name(), Err: err}
		}
		n += m
		if m == 0 || n < len(buf) {
			return buf[:n], nil
		}
		buf = append(buf, make([]byte, len(buf))...)
	}
}
