// Package stream carries container standard streams over HTTP: the
// multiplexed frame format of the Docker/Podman APIs, hijacked attach
// connections, conmon's attach socket, and detach-key handling.
package stream

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Stream ids used in frame headers.
const (
	Stdin  byte = 0
	Stdout byte = 1
	Stderr byte = 2
	// System carries an error message from the server (Podman reads id 3
	// as a server-side error).
	System byte = 3
)

// HeaderLen is the size of a frame header: stream id, three zero bytes and
// the payload length as a big-endian uint32.
const HeaderLen = 8

// MaxFrame bounds the payload a Demux accepts in one frame.
const MaxFrame = 16 << 20

// ErrBadFrame is wrapped by Demux for a header it cannot accept.
var ErrBadFrame = errors.New("bad stream frame")

// Mux writes frames to one underlying writer; writers for different streams
// may be used from different goroutines, frames never interleave.
type Mux struct {
	mu    sync.Mutex
	w     io.Writer
	flush func() error
}

// NewMux returns a Mux writing to w. flush, when not nil, runs after every
// frame so the client sees output at once.
func NewMux(w io.Writer, flush func() error) *Mux {
	return &Mux{w: w, flush: flush}
}

// WriteFrame writes p as one frame of stream id. Empty payloads are skipped.
func (m *Mux) WriteFrame(id byte, p []byte) error {
	if len(p) == 0 {
		return nil
	}
	var hdr [HeaderLen]byte
	hdr[0] = id
	binary.BigEndian.PutUint32(hdr[4:], uint32(len(p)))
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.w.Write(hdr[:]); err != nil {
		return err
	}
	if _, err := m.w.Write(p); err != nil {
		return err
	}
	if m.flush != nil {
		return m.flush()
	}
	return nil
}

// Writer returns an io.Writer framing everything written as stream id.
func (m *Mux) Writer(id byte) io.Writer {
	return frameWriter{m: m, id: id}
}

type frameWriter struct {
	m  *Mux
	id byte
}

func (f frameWriter) Write(p []byte) (int, error) {
	if err := f.m.WriteFrame(f.id, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Demux reads frames from r until EOF, writing stdout and stderr payloads
// to the given writers (nil discards). A System frame ends Demux with its
// text as the error. A clean EOF between frames returns nil.
func Demux(r io.Reader, stdout, stderr io.Writer) error {
	var hdr [HeaderLen]byte
	buf := make([]byte, 32<<10)
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("%w: short header: %w", ErrBadFrame, err)
		}
		id := hdr[0]
		if id > System || hdr[1] != 0 || hdr[2] != 0 || hdr[3] != 0 {
			return fmt.Errorf("%w: header % x", ErrBadFrame, hdr)
		}
		size := binary.BigEndian.Uint32(hdr[4:])
		if size > MaxFrame {
			return fmt.Errorf("%w: frame of %d bytes", ErrBadFrame, size)
		}
		var dst io.Writer
		switch id {
		case Stdin, Stdout:
			dst = stdout
		case Stderr:
			dst = stderr
		case System:
			msg := make([]byte, size)
			if _, err := io.ReadFull(r, msg); err != nil {
				return fmt.Errorf("%w: short payload: %w", ErrBadFrame, err)
			}
			return fmt.Errorf("server: %s", msg)
		}
		if dst == nil {
			dst = io.Discard
		}
		for size > 0 {
			n := min(int(size), len(buf))
			if _, err := io.ReadFull(r, buf[:n]); err != nil {
				return fmt.Errorf("%w: short payload: %w", ErrBadFrame, err)
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return err
			}
			size -= uint32(n)
		}
	}
}
