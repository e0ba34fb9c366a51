package server

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// maxUnixPathLen is the longest socket path Linux accepts (sun_path less its NUL).
const maxUnixPathLen = 107

// Listen opens a listener for addr, which is tcp://HOST:PORT or
// unix:///PATH. For a unix socket the parent directory is created and a stale
// socket file left by a process that died is removed; a socket that still
// accepts connections, or a path that is not a socket, is an error.
func Listen(addr string) (net.Listener, error) {
	scheme, rest, ok := strings.Cut(addr, "://")
	if !ok {
		return nil, fmt.Errorf("listen address %q: want tcp://HOST:PORT or unix:///PATH", addr)
	}
	switch scheme {
	case "tcp":
		return listenTCP(addr, rest)
	case "unix":
		return listenUnix(addr, rest)
	default:
		return nil, fmt.Errorf("listen address %q: unsupported scheme %q (want tcp or unix)", addr, scheme)
	}
}

// listenTCP listens on HOST:PORT.
func listenTCP(addr, hostPort string) (net.Listener, error) {
	if strings.ContainsAny(hostPort, "/?#") {
		return nil, fmt.Errorf("listen address %q: a tcp address is HOST:PORT without a path", addr)
	}
	if _, _, err := net.SplitHostPort(hostPort); err != nil {
		return nil, fmt.Errorf("listen address %q: %w", addr, err)
	}
	ln, err := net.Listen("tcp", hostPort)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}

// listenUnix listens on the socket at path.
func listenUnix(addr, path string) (net.Listener, error) {
	if path == "" {
		return nil, fmt.Errorf("listen address %q: empty socket path", addr)
	}
	if len(path) > maxUnixPathLen {
		return nil, fmt.Errorf("listen address %q: socket path longer than %d bytes", addr, maxUnixPathLen)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("listen on %s: create socket directory: %w", addr, err)
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}

// removeStaleSocket removes a socket file at path that nobody serves any more.
func removeStaleSocket(path string) error {
	info, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if info.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("%s exists and is not a socket", path)
	}
	conn, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		conn.Close()
		return fmt.Errorf("%s: another process is serving this socket", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale socket: %w", err)
	}
	return nil
}
