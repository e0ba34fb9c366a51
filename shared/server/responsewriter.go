package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
)

// statusHijacked is the status a recorder reports for a connection that was
// hijacked before any status was written.
const statusHijacked = 0

// responseRecorder notes the status and size of a response on its way
// through. It passes Flush, Hijack and the http.ResponseController methods
// on to the writer it wraps (through Unwrap), so middleware that uses it
// never breaks streaming or hijacking.
type responseRecorder struct {
	http.ResponseWriter
	status      int
	bytes       int64
	wroteHeader bool
	hijacked    bool
	// flushed: the handler flushed before returning, so it streamed.
	flushed bool
}

// newRecorder wraps w.
func newRecorder(w http.ResponseWriter) *responseRecorder {
	return &responseRecorder{ResponseWriter: w}
}

// WriteHeader records the final status; informational 1xx codes other than
// 101 Switching Protocols pass through without counting as final.
func (rw *responseRecorder) WriteHeader(code int) {
	if !rw.wroteHeader {
		if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
			rw.ResponseWriter.WriteHeader(code)
			return
		}
		rw.status = code
		rw.wroteHeader = true
	}
	rw.ResponseWriter.WriteHeader(code)
}

// Write counts the bytes written; a first Write implies status 200.
func (rw *responseRecorder) Write(p []byte) (int, error) {
	if !rw.wroteHeader {
		rw.status = http.StatusOK
		rw.wroteHeader = true
	}
	n, err := rw.ResponseWriter.Write(p)
	rw.bytes += int64(n)
	return n, err
}

// ReadFrom copies src to the response through the wrapped writer's own
// io.ReaderFrom where it has one, so net/http can still use sendfile for
// file downloads behind the middleware.
func (rw *responseRecorder) ReadFrom(src io.Reader) (int64, error) {
	if !rw.wroteHeader {
		rw.status = http.StatusOK
		rw.wroteHeader = true
	}
	n, err := io.Copy(rw.ResponseWriter, src)
	rw.bytes += n
	return n, err
}

// Flush sends buffered data to the client; it implements http.Flusher.
func (rw *responseRecorder) Flush() {
	_ = rw.FlushError()
}

// FlushError is Flush reporting failure; http.ResponseController prefers it.
func (rw *responseRecorder) FlushError() error {
	rw.flushed = true
	if !rw.wroteHeader {
		rw.status = http.StatusOK
		rw.wroteHeader = true
	}
	return http.NewResponseController(rw.ResponseWriter).Flush()
}

// Hijack takes over the connection; it implements http.Hijacker and returns
// an error wrapping http.ErrNotSupported when the wrapped writer cannot.
func (rw *responseRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, buf, err := http.NewResponseController(rw.ResponseWriter).Hijack()
	if err == nil {
		rw.hijacked = true
		if !rw.wroteHeader {
			rw.status = statusHijacked
			rw.wroteHeader = true
		}
	}
	return conn, buf, err
}

// Unwrap returns the wrapped writer, for http.NewResponseController.
func (rw *responseRecorder) Unwrap() http.ResponseWriter {
	return rw.ResponseWriter
}

// Status returns the status written so far: 0 when none was written (or the
// connection was hijacked first), which net/http will send as 200.
func (rw *responseRecorder) Status() int {
	return rw.status
}
