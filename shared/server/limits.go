package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// Limits bound what slow or numerous clients can hold of a server: without
// them, 7,500 PUTs whose bodies stopped arriving held 7,500 descriptors
// forever and every other client got "too many open files".
type Limits struct {
	// ReadHeaderTimeout bounds the wait for a request's headers.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a kept-alive connection that sends nothing.
	IdleTimeout time.Duration
	// BodyIdleTimeout fails a body read that brings no byte for this long;
	// the deadline moves with every byte that arrives.
	BodyIdleTimeout time.Duration
	// MinBodyRate is the slowest average a body may arrive at, in bytes
	// per second, once BodyRateGrace has passed.
	MinBodyRate   int64
	BodyRateGrace time.Duration
	// MaxConns caps the open connections; MaxConnsPerClient those of one
	// client address (TCP only: every unix socket client shares the local
	// address). A connection over a cap is answered 503 and closed.
	MaxConns, MaxConnsPerClient int
	// TLS, when set, serves HTTPS with it, inside the connection caps.
	TLS *tls.Config
}

// DefaultLimits suit both services: far above what a client does, far
// below the 20,000 descriptors a host gives a process.
var DefaultLimits = Limits{
	ReadHeaderTimeout: 10 * time.Second,
	IdleTimeout:       time.Minute,
	BodyIdleTimeout:   30 * time.Second,
	MinBodyRate:       1 << 10,
	BodyRateGrace:     30 * time.Second,
	MaxConns:          4096,
	MaxConnsPerClient: 512,
}

// ErrSlowBody is a request body that stopped arriving or arrives below the
// minimum rate; a service answers it 408.
var ErrSlowBody = errors.New("request body too slow")

// guardBodies gives every request body a read deadline that moves with
// progress (BodyIdleTimeout after the last byte) and a minimum average
// rate. The deadline is cleared once the body ends, so a handler that takes
// over the connection afterwards (attach, exec) is not cut off.
func guardBodies(next http.Handler, limits Limits) http.Handler {
	if limits.BodyIdleTimeout <= 0 && limits.MinBodyRate <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &guardedBody{ReadCloser: r.Body, w: w, rc: http.NewResponseController(w), limits: limits, start: time.Now()}
		}
		next.ServeHTTP(w, r)
	})
}

type guardedBody struct {
	io.ReadCloser
	w      http.ResponseWriter
	rc     *http.ResponseController
	limits Limits
	start  time.Time
	read   int64
	done   bool
	err    error
}

func (b *guardedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.done {
		return b.ReadCloser.Read(p)
	}
	if b.limits.BodyIdleTimeout > 0 {
		_ = b.rc.SetReadDeadline(time.Now().Add(b.limits.BodyIdleTimeout))
	}
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	var ne net.Error
	switch {
	case err != nil && errors.As(err, &ne) && ne.Timeout():
		return n, b.cutOff(fmt.Errorf("%w: no byte for %v", ErrSlowBody, b.limits.BodyIdleTimeout))
	case err != nil:
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
		return n, err
	}
	if elapsed := time.Since(b.start); b.limits.MinBodyRate > 0 && elapsed > b.limits.BodyRateGrace &&
		float64(b.read) < float64(b.limits.MinBodyRate)*elapsed.Seconds() {
		return n, b.cutOff(fmt.Errorf("%w: %d bytes in %v, below %d bytes/s", ErrSlowBody, b.read, elapsed.Round(time.Millisecond), b.limits.MinBodyRate))
	}
	return n, nil
}

// cutOff ends a body that is too slow: the connection's reads fail from now
// on, the body is closed and the answer says Connection: close, so the
// server neither waits for the rest of the body nor keeps the connection.
func (b *guardedBody) cutOff(err error) error {
	b.done = true
	b.err = err
	b.w.Header().Set("Connection", "close")
	_ = b.rc.SetReadDeadline(time.Now())
	_ = b.ReadCloser.Close()
	return err
}

// capacityBody and capacityResponse are what a connection over a cap gets
// before it is closed.
const capacityBody = "server at capacity for this client; retry later\n"

var capacityResponse = fmt.Sprintf("HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(capacityBody), capacityBody)

// limitListener caps open connections, in all and per client address.
type limitListener struct {
	net.Listener
	limits Limits

	mu       sync.Mutex
	open     int
	byClient map[string]int
}

// LimitListener returns ln with limits' connection caps applied.
func LimitListener(ln net.Listener, limits Limits) net.Listener {
	if limits.MaxConns <= 0 && limits.MaxConnsPerClient <= 0 {
		return ln
	}
	return &limitListener{Listener: ln, limits: limits, byClient: map[string]int{}}
}

// Accept returns the next connection within the caps; one over a cap is
// answered 503 and closed without reaching the server.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		client := clientOf(c)
		if l.admit(client) {
			return &limitedConn{Conn: c, release: func() { l.release(client) }}, nil
		}
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = io.WriteString(c, capacityResponse)
		_ = c.Close()
	}
}

func (l *limitListener) admit(client string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.limits.MaxConns > 0 && l.open >= l.limits.MaxConns {
		return false
	}
	if client != "" && l.limits.MaxConnsPerClient > 0 && l.byClient[client] >= l.limits.MaxConnsPerClient {
		return false
	}
	l.open++
	if client != "" {
		l.byClient[client]++
	}
	return true
}

func (l *limitListener) release(client string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if client != "" {
		if l.byClient[client]--; l.byClient[client] <= 0 {
			delete(l.byClient, client)
		}
	}
}

// clientOf is the client address of a TCP connection ("" otherwise).
func clientOf(c net.Conn) string {
	if addr, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return addr.IP.String()
	}
	return ""
}

// limitedConn gives its slot back once, when closed.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
