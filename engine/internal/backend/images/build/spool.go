package build

import (
	"bytes"
	"io"
	"os"
	"sync"
	"time"
)

// spoolMemory is how much of a received context is kept in memory; the
// rest goes to a file.
const spoolMemory = 64 << 20

// spool keeps a stream to be read again later: in memory up to a limit,
// then in a file under dir.
type spool struct {
	dir    string
	limit  int
	chunks [][]byte
	held   int
	file   *os.File
	ph     *phases
}

// spoolChunk is the size of the memory blocks (no copying as it grows).
const spoolChunk = 1 << 20

// chunkPool recycles the memory blocks between builds: a rebuild then
// copies its context into memory that is already mapped.
var chunkPool = sync.Pool{New: func() any {
	b := make([]byte, 0, spoolChunk)
	return &b
}}

func newSpool(dir string, limit int, ph *phases) *spool {
	return &spool{dir: dir, limit: limit, ph: ph}
}

// Write implements io.Writer.
func (s *spool) Write(p []byte) (int, error) {
	defer s.ph.since(phaseSpool, time.Now())
	n := len(p)
	for len(p) > 0 && s.file == nil {
		if s.held >= s.limit {
			f, err := os.CreateTemp(s.dir, tmpPrefix+"spool-")
			if err != nil {
				return 0, err
			}
			s.file = f
			break
		}
		if len(s.chunks) == 0 || len(s.chunks[len(s.chunks)-1]) == cap(s.chunks[len(s.chunks)-1]) {
			s.chunks = append(s.chunks, (*chunkPool.Get().(*[]byte))[:0])
		}
		last := &s.chunks[len(s.chunks)-1]
		take := min(len(p), cap(*last)-len(*last), s.limit-s.held)
		*last = append(*last, p[:take]...)
		s.held += take
		p = p[take:]
	}
	if len(p) > 0 {
		if _, err := s.file.Write(p); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// reader reads the spooled stream from its start.
func (s *spool) reader() io.Reader {
	readers := make([]io.Reader, 0, len(s.chunks)+1)
	for _, c := range s.chunks {
		readers = append(readers, bytes.NewReader(c))
	}
	if s.file != nil {
		readers = append(readers, io.NewSectionReader(s.file, 0, 1<<62))
	}
	return io.MultiReader(readers...)
}

// close returns the memory to the pool and removes the file.
func (s *spool) close() {
	for _, c := range s.chunks {
		chunkPool.Put(&c)
	}
	s.chunks = nil
	if s.file != nil {
		s.file.Close()
		os.Remove(s.file.Name())
		s.file = nil
	}
}
