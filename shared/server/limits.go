package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Limits bound what slow or numerous clients can hold of a server: without
// them, 7,500 PUTs whose bodies stopped arriving held 7,500 descriptors
// forever and every other client got "too many open files". The defence
// sheds what is stalled instead of turning clients away: with 3,000 stalled
// bodies held against it, a cap on connections per client address answered
// the next client of that address 503 although descriptors remained.
type Limits struct {
	// ReadHeaderTimeout bounds the wait for a request's headers.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a kept-alive connection that sends nothing.
	IdleTimeout time.Duration
	// BodyIdleTimeout fails a body read that brings no byte for this long;
	// the deadline moves with every byte that arrives.
	BodyIdleTimeout time.Duration
	// MinBodyRate is the slowest average a body may arrive at, in bytes
	// per second, once BodyRateGrace has passed; a read that waits past
	// the moment its body falls below it fails.
	MinBodyRate   int64
	BodyRateGrace time.Duration
	// MaxConns caps the open connections; 0 takes three quarters of the
	// descriptors the process may open (RLIMIT_NOFILE when the server
	// starts), the rest being for files, databases and children. At the cap
	// the body furthest below MinBodyRate is shed to make room; only when
	// none is below it, the new connection is answered 503 and closed.
	MaxConns int
	// MaxBodiesPerClient caps the request bodies being received at once
	// from one client address (TCP only: every unix socket client shares
	// the local address). A body over it sheds that client's body furthest
	// below MinBodyRate; only when none is below it, the new request is
	// answered 503. A client is never refused a connection for its
	// address: many clients may share one (NAT, a proxy).
	MaxBodiesPerClient int
	// TLS, when set, serves HTTPS with it, inside the connection caps.
	TLS *tls.Config
}

// DefaultLimits suit both services: far above what a client does, far
// below the descriptors a host gives a process.
var DefaultLimits = Limits{
	ReadHeaderTimeout:  10 * time.Second,
	IdleTimeout:        time.Minute,
	BodyIdleTimeout:    30 * time.Second,
	MinBodyRate:        1 << 10,
	BodyRateGrace:      10 * time.Second,
	MaxBodiesPerClient: 128,
}

// ErrSlowBody is a request body that stopped arriving, arrives below the
// minimum rate, or was shed to make room for another; a service answers it
// 408.
var ErrSlowBody = errors.New("request body too slow")

// connsForDescriptors is the connection cap MaxConns 0 stands for: three
// quarters of the process's descriptor limit.
func connsForDescriptors() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return 768
	}
	return int(min(rl.Cur, 1<<22) * 3 / 4)
}

// bodies tracks the request bodies being received, by client address, so
// that the stalled ones can be shed when a cap is reached.
type bodies struct {
	limits   Limits
	mu       sync.Mutex
	all      map[*guardedBody]struct{}
	byClient map[string]map[*guardedBody]struct{}
}

func newBodies(limits Limits) *bodies {
	return &bodies{limits: limits, all: map[*guardedBody]struct{}{}, byClient: map[string]map[*guardedBody]struct{}{}}
}

// shedAge is how long a body must have been received before it can be
// judged stalled and shed: a body that has just begun has not had its
// chance yet.
func (t *bodies) shedAge() time.Duration {
	return min(t.limits.BodyRateGrace, time.Second)
}

// admit registers b. Over its client's cap, that client's most stalled
// body is shed to make room; false when none is stalled.
func (t *bodies) admit(b *guardedBody) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if b.client != "" && t.limits.MaxBodiesPerClient > 0 && len(t.byClient[b.client]) >= t.limits.MaxBodiesPerClient {
		victim := t.mostStalled(t.byClient[b.client])
		if victim == nil {
			return false
		}
		t.removeLocked(victim)
		victim.shedNow()
	}
	t.all[b] = struct{}{}
	if b.client != "" {
		if t.byClient[b.client] == nil {
			t.byClient[b.client] = map[*guardedBody]struct{}{}
		}
		t.byClient[b.client][b] = struct{}{}
	}
	return true
}

// shedOne sheds the most stalled body of all; false when none is stalled.
func (t *bodies) shedOne() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	victim := t.mostStalled(t.all)
	if victim == nil {
		return false
	}
	t.removeLocked(victim)
	victim.shedNow()
	return true
}

// mostStalled is the body of set furthest below MinBodyRate among those
// older than shedAge, or nil.
func (t *bodies) mostStalled(set map[*guardedBody]struct{}) *guardedBody {
	if t.limits.MinBodyRate <= 0 {
		return nil
	}
	now := time.Now()
	var worst *guardedBody
	var worstDeficit float64
	for b := range set {
		age := now.Sub(b.start)
		if age < t.shedAge() {
			continue
		}
		if deficit := float64(t.limits.MinBodyRate)*age.Seconds() - float64(b.read.Load()); deficit > worstDeficit {
			worst, worstDeficit = b, deficit
		}
	}
	return worst
}

func (t *bodies) remove(b *guardedBody) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.removeLocked(b)
}

func (t *bodies) removeLocked(b *guardedBody) {
	delete(t.all, b)
	if set := t.byClient[b.client]; set != nil {
		delete(set, b)
		if len(set) == 0 {
			delete(t.byClient, b.client)
		}
	}
}

// guardBodies gives every request body a read deadline that moves with
// progress (BodyIdleTimeout after the last byte) and a minimum average
// rate, and counts it against its client's MaxBodiesPerClient. The
// deadline is cleared once the body ends, so a handler that takes over the
// connection afterwards (attach, exec) is not cut off.
func guardBodies(next http.Handler, limits Limits, tracked *bodies) http.Handler {
	if limits.BodyIdleTimeout <= 0 && limits.MinBodyRate <= 0 && limits.MaxBodiesPerClient <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		b := &guardedBody{ReadCloser: r.Body, w: w, rc: http.NewResponseController(w), limits: limits, start: time.Now(), cancel: cancel, length: r.ContentLength}
		if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			b.client = host
		}
		if !tracked.admit(b) {
			w.Header().Set("Connection", "close")
			w.Header().Set("Retry-After", "1")
			http.Error(w, strings.TrimSpace(bodiesBusy), http.StatusServiceUnavailable)
			return
		}
		b.tracked = tracked
		defer b.untrack()
		r.Body = b
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// bodiesBusy answers a body over its client's cap when none of that
// client's bodies is stalled.
const bodiesBusy = "too many request bodies in flight from this client address; retry later\n"

type guardedBody struct {
	io.ReadCloser
	w       http.ResponseWriter
	rc      *http.ResponseController
	limits  Limits
	start   time.Time
	client  string
	length  int64 // the Content-Length, -1 when unknown
	cancel  context.CancelFunc
	tracked *bodies
	read    atomic.Int64
	shed    atomic.Bool
	once    sync.Once
	done    bool
	err     error
}

// untrack takes b out of the tracked bodies, once.
func (b *guardedBody) untrack() {
	b.once.Do(func() {
		if b.tracked != nil {
			b.tracked.remove(b)
		}
	})
}

// shedNow makes b's pending and next reads fail and cancels its request,
// from another goroutine: the flag is set before the deadline, and Read
// looks at it after setting its own, so one of the two sees the other.
func (b *guardedBody) shedNow() {
	b.shed.Store(true)
	_ = b.rc.SetReadDeadline(time.Now())
	b.cancel()
}

// deadline is when the next read must have brought a byte: BodyIdleTimeout
// from now, or the moment the body falls below MinBodyRate with no further
// byte, whichever comes first.
func (b *guardedBody) deadline(now time.Time) time.Time {
	var d time.Time
	if b.limits.BodyIdleTimeout > 0 {
		d = now.Add(b.limits.BodyIdleTimeout)
	}
	if b.limits.MinBodyRate > 0 {
		owed := time.Duration(float64(b.read.Load()) / float64(b.limits.MinBodyRate) * float64(time.Second))
		at := b.start.Add(max(b.limits.BodyRateGrace, owed))
		if at.Before(now) {
			at = now
		}
		if d.IsZero() || at.Before(d) {
			d = at
		}
	}
	return d
}

func (b *guardedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.done {
		return b.ReadCloser.Read(p)
	}
	now := time.Now()
	if d := b.deadline(now); !d.IsZero() {
		_ = b.rc.SetReadDeadline(d)
	}
	if b.shed.Load() {
		return 0, b.cutOff(fmt.Errorf("%w: shed to make room for other clients (%d bytes in %v)", ErrSlowBody, b.read.Load(), now.Sub(b.start).Round(time.Millisecond)))
	}
	n, err := b.ReadCloser.Read(p)
	read := b.read.Add(int64(n))
	elapsed := time.Since(b.start)
	belowRate := b.limits.MinBodyRate > 0 && elapsed > b.limits.BodyRateGrace &&
		float64(read) < float64(b.limits.MinBodyRate)*elapsed.Seconds()
	var ne net.Error
	switch {
	case b.shed.Load():
		return n, b.cutOff(fmt.Errorf("%w: shed to make room for other clients (%d bytes in %v)", ErrSlowBody, read, elapsed.Round(time.Millisecond)))
	case err != nil && errors.As(err, &ne) && ne.Timeout() && belowRate:
		return n, b.cutOff(fmt.Errorf("%w: %d bytes in %v, below %d bytes/s", ErrSlowBody, read, elapsed.Round(time.Millisecond), b.limits.MinBodyRate))
	case err != nil && errors.As(err, &ne) && ne.Timeout():
		return n, b.cutOff(fmt.Errorf("%w: no byte for %v", ErrSlowBody, b.limits.BodyIdleTimeout))
	case err != nil:
		b.done = true
		b.untrack()
		_ = b.rc.SetReadDeadline(time.Time{})
		return n, err
	case belowRate:
		return n, b.cutOff(fmt.Errorf("%w: %d bytes in %v, below %d bytes/s", ErrSlowBody, read, elapsed.Round(time.Millisecond), b.limits.MinBodyRate))
	case b.length > 0 && read >= b.length:
		// Arrived whole: a handler that decodes it without reading to EOF
		// and then works on (a pull, an exec) is never taken for a stalled
		// body and shed.
		b.done = true
		b.untrack()
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, nil
}

// cutOff ends a body that is too slow: the connection's reads fail from now
// on, the body is closed and the answer says Connection: close, so the
// server neither waits for the rest of the body nor keeps the connection.
func (b *guardedBody) cutOff(err error) error {
	b.done = true
	b.err = err
	b.untrack()
	b.w.Header().Set("Connection", "close")
	_ = b.rc.SetReadDeadline(time.Now())
	_ = b.ReadCloser.Close()
	return err
}

// capacityBody and capacityResponse are what a connection over a cap gets
// before it is closed.
const capacityBody = "server at capacity; retry later\n"

var capacityResponse = fmt.Sprintf("HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(capacityBody), capacityBody)

// limitListener caps open connections; at the cap it sheds the most
// stalled body to make room before it turns a connection away.
type limitListener struct {
	net.Listener
	max    int
	bodies *bodies

	mu   sync.Mutex
	open int
}

// Accept returns the next connection within the cap; one over it, when no
// stalled body could be shed for it, is answered 503 and closed without
// reaching the server.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.admit() {
			return &limitedConn{Conn: c, release: l.release}, nil
		}
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = io.WriteString(c, capacityResponse)
		_ = c.Close()
	}
}

// admit counts a new connection. At the cap, a stalled body is shed: its
// connection closes a moment later, so the count may pass the cap by the
// connections being shed, which the descriptors kept aside cover.
func (l *limitListener) admit() bool {
	l.mu.Lock()
	full := l.open >= l.max
	l.mu.Unlock()
	if full && (l.bodies == nil || !l.bodies.shedOne()) {
		return false
	}
	l.mu.Lock()
	l.open++
	l.mu.Unlock()
	return true
}

func (l *limitListener) release() {
	l.mu.Lock()
	l.open--
	l.mu.Unlock()
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
