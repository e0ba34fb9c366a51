package stream

import (
	"bufio"
	"io"
)

// Outputs are the writers of a hijacked attach or exec stream, shared by
// the libpod and the Docker front doors: with a terminal, raw bytes on
// stdout (flushed on every write, so an interactive client sees them at
// once) and no stderr; without one, multiplexed frames on a Mux that also
// carries error frames. wantOut and wantErr choose which writers are
// given; a stream not wanted has a nil writer.
func Outputs(w *bufio.Writer, tty, wantOut, wantErr bool) (stdout, stderr io.Writer, mux *Mux) {
	if tty {
		if wantOut {
			stdout = flushEach{w}
		}
		return stdout, nil, nil
	}
	mux = NewMux(w, w.Flush)
	if wantOut {
		stdout = mux.Writer(Stdout)
	}
	if wantErr {
		stderr = mux.Writer(Stderr)
	}
	return stdout, stderr, mux
}

// flushEach flushes a buffered writer after every write.
type flushEach struct{ w *bufio.Writer }

func (f flushEach) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err != nil {
		return n, err
	}
	return n, f.w.Flush()
}
