package files

import "io"

// pipelineBuffers is how many buffers a large body cycles through: the request body is
// read into one while the file is written from another, so receiving and writing
// proceed in parallel instead of in turns.
const pipelineBuffers = 3

// copyBody copies src to dst and returns the bytes written. A body that fits in one
// buffer is copied directly; a larger one goes through a reader/writer pipeline.
func (t *Tree) copyBody(dst io.Writer, src io.Reader, sizeHint int64) (int64, error) {
	if sizeHint >= 0 && sizeHint < copyBuf {
		// A small body of known length gets a buffer of its size (plus one byte to see
		// whether it lied) instead of a large pooled one, which keeps many concurrent
		// small writes cheap in memory.
		small := make([]byte, sizeHint+1)
		n, err := fill(src, small)
		if err != nil && err != io.EOF {
			return 0, err
		}
		if err == nil {
			// More than announced: carry on through the general path.
			return t.copyRest(dst, src, small)
		}
		written, werr := dst.Write(small[:n])
		return int64(written), werr
	}
	first := t.bufs.Get().(*[]byte)
	n, err := fill(src, *first)
	if err != nil {
		defer t.bufs.Put(first)
		if err != io.EOF {
			return 0, err
		}
		written, werr := dst.Write((*first)[:n])
		return int64(written), werr
	}

	type chunk struct {
		buf *[]byte
		n   int
	}
	free := make(chan *[]byte, pipelineBuffers)
	full := make(chan chunk, pipelineBuffers)
	for i := 1; i < pipelineBuffers; i++ {
		free <- t.bufs.Get().(*[]byte)
	}
	var (
		written  int64
		writeErr error
		failed   = make(chan struct{})
		done     = make(chan struct{})
	)
	go func() {
		defer close(done)
		for c := range full {
			if writeErr == nil {
				w, err := dst.Write((*c.buf)[:c.n])
				written += int64(w)
				if err != nil {
					writeErr = err
					close(failed)
				}
			}
			free <- c.buf
		}
	}()

	full <- chunk{first, n}
	var readErr error
read:
	for {
		var buf *[]byte
		select {
		case buf = <-free:
		case <-failed:
			break read
		}
		n, err := fill(src, *buf)
		if n > 0 {
			full <- chunk{buf, n}
		} else {
			free <- buf
		}
		if err != nil {
			if err != io.EOF {
				readErr = err
			}
			break
		}
	}
	close(full)
	<-done
	for range pipelineBuffers {
		t.bufs.Put(<-free)
	}
	if writeErr != nil {
		return written, writeErr
	}
	return written, readErr
}

// fill reads from src until buf is full or src fails, and returns src's own error:
// io.EOF (which readers return unwrapped) is the one clean end of the body. Unlike
// io.ReadFull it never turns a short read into io.ErrUnexpectedEOF, because net/http
// reports a body cut short of its Content-Length with that very error, and such a body
// must fail the write, not end it.
func fill(src io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := src.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// copyRest writes head and then copies the rest of src.
func (t *Tree) copyRest(dst io.Writer, src io.Reader, head []byte) (int64, error) {
	written, err := dst.Write(head)
	if err != nil {
		return int64(written), err
	}
	n, err := t.copyBody(dst, src, -1)
	return int64(written) + n, err
}
