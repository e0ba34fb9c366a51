package stream

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// RawStreamType is the content type of a hijacked attach or exec stream.
const RawStreamType = "application/vnd.docker.raw-stream"

// Hijack takes over the connection of an HTTP request and writes the
// response head that Podman and Docker clients expect: "101 UPGRADED" with
// the requested protocol when the client asked for an upgrade
// (Connection: Upgrade, Upgrade: tcp), a plain "200 OK" otherwise. The
// caller owns and must close the returned connection; reads go through the
// returned reader, which may hold bytes the client already sent.
func Hijack(w http.ResponseWriter, r *http.Request) (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, nil, fmt.Errorf("hijack connection: %w", err)
	}
	// A hijacked stream lives as long as its session: no deadline the
	// server set for the request's body or headers applies to it.
	_ = conn.SetDeadline(time.Time{})
	proto := r.Header.Get("Upgrade")
	if proto != "" && headerHasToken(r.Header, "Connection", "upgrade") {
		fmt.Fprintf(rw, "HTTP/1.1 101 UPGRADED\r\nContent-Type: %s\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", RawStreamType, sanitizeToken(proto))
	} else {
		fmt.Fprintf(rw, "HTTP/1.1 200 OK\r\nContent-Type: %s\r\n\r\n", RawStreamType)
	}
	if err := rw.Flush(); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("write hijack header: %w", err)
	}
	return &lingerConn{Conn: conn}, rw, nil
}

// lingerTime bounds how long a closed hijacked connection goes on reading
// what its client still sends.
const lingerTime = 2 * time.Second

// lingerConn is a hijacked connection whose Close does not reset it. A
// session often ends while its client's input is still unread (a shell
// that exited before the terminal's last keys, a client that goes on
// copying its stdin), and closing a socket with unread bytes makes the
// kernel answer with a reset, which can reach the client before the end of
// the output it had not read yet: docker run -it then failed with
// "connection reset by peer" and exit 1 instead of the container's code.
// Close sends the end of the stream (a half-close) at once and reads and
// drops what still comes, in the background, until the client closes its
// side or lingerTime passes, then closes the socket. The net/http server
// closes its connections the same way.
type lingerConn struct {
	net.Conn
	once sync.Once
}

func (c *lingerConn) Close() error {
	c.once.Do(func() {
		if CloseWrite(c.Conn) != nil {
			c.Conn.Close()
			return
		}
		go func() {
			_ = c.Conn.SetReadDeadline(time.Now().Add(lingerTime))
			_, _ = io.Copy(io.Discard, c.Conn)
			c.Conn.Close()
		}()
	})
	return nil
}

// CloseWrite half-closes the connection.
func (c *lingerConn) CloseWrite() error { return CloseWrite(c.Conn) }

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, part := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(part), token) {
				return true
			}
		}
	}
	return false
}

// sanitizeToken keeps a header value from breaking the response head.
func sanitizeToken(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x21 || r > 0x7e {
			return -1
		}
		return r
	}, s)
}

// CloseWrite half-closes a connection when it supports it, telling the peer
// no more data follows while still reading its answer.
func CloseWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
