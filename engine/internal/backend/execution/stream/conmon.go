package stream

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Conmon's attach socket tags every packet it sends with the pipe the data
// came from.
const (
	conmonStdin  byte = 1
	conmonStdout byte = 2
	conmonStderr byte = 3
)

// conmonBufSize is conmon's read size plus the tag byte.
const conmonBufSize = 8192 + 1

// DialAttach connects to conmon's attach socket (a SOCK_SEQPACKET unix
// socket). Long paths are reached through /proc/self/fd so the 108-byte
// sun_path limit does not apply.
func DialAttach(path string) (*net.UnixConn, error) {
	dir, err := os.OpenFile(filepath.Dir(path), unix.O_PATH, 0)
	if err != nil {
		return nil, fmt.Errorf("open attach socket directory: %w", err)
	}
	defer dir.Close()
	short := fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), filepath.Base(path))
	conn, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: short, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("connect to container attach socket %s: %w", path, err)
	}
	return conn, nil
}

// Output receives what conmon forwards from the container.
type Output struct {
	// Stdout and Stderr get the container's streams; nil discards.
	// With a terminal everything arrives as Stdout.
	Stdout io.Writer
	Stderr io.Writer
}

// CopyFromConmon reads packets from conmon's attach socket until conmon
// closes it (the container exited) and routes them by their tag.
func CopyFromConmon(conn io.Reader, out Output) error {
	buf := make([]byte, conmonBufSize)
	for {
		n, err := conn.Read(buf)
		if n > 1 {
			var dst io.Writer
			switch buf[0] {
			case conmonStdout:
				dst = out.Stdout
			case conmonStderr:
				dst = out.Stderr
			case conmonStdin:
				dst = nil
			}
			if dst != nil {
				if _, werr := dst.Write(buf[1:n]); werr != nil {
					return werr
				}
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return &ConmonReadError{Err: err}
		}
		if n == 0 {
			// A zero-length packet is how SOCK_SEQPACKET reports the
			// peer's close on some kernels.
			return nil
		}
	}
}

// ConmonReadError is a failed read of conmon's attach socket (not of the
// client's end): conmon went away without a clean close, e.g. it exited
// before it accepted the connection (ECONNRESET). What the container wrote
// meanwhile did not reach the client; its log still has it.
type ConmonReadError struct{ Err error }

func (e *ConmonReadError) Error() string {
	return "reading the container's attach socket: " + e.Err.Error()
}

func (e *ConmonReadError) Unwrap() error { return e.Err }

// EndLevel is the level to log an attach session's error at: a
// ConmonReadError (output may be lost) is a warning; the client going away
// is routine.
func EndLevel(err error) slog.Level {
	var conmonErr *ConmonReadError
	if errors.As(err, &conmonErr) {
		return slog.LevelWarn
	}
	return slog.LevelDebug
}

// ResizeTerminal asks conmon to resize the container's terminal by writing
// a resize message to its control fifo (the "ctl" file in the bundle).
func ResizeTerminal(ctlPath string, height, width uint16) error {
	f, err := os.OpenFile(ctlPath, os.O_WRONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("open conmon control fifo: %w", err)
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "1 %d %d\n", height, width); err != nil {
		return fmt.Errorf("write conmon control fifo: %w", err)
	}
	return nil
}
