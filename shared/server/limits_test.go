package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// startLimited runs h under limits on a loopback listener and returns its
// address.
func startLimited(t *testing.T, h http.Handler, limits Limits) string {
	t.Helper()
	ln, err := Listen("tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- RunWithLimits(ctx, ln, h, slog.New(slog.DiscardHandler), time.Second, limits) }()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String()
}

// bodyReader answers 408 for a slow body, 200 with the body's length otherwise.
var bodyReader = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	n, err := io.Copy(io.Discard, r.Body)
	if errors.Is(err, ErrSlowBody) {
		http.Error(w, err.Error(), http.StatusRequestTimeout)
		return
	}
	fmt.Fprint(w, n)
})

// sendHead opens a connection and sends a PUT head announcing size bytes
// and the first of them.
func sendHead(t *testing.T, addr string, size int, first string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "PUT /f HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", size, first)
	return c
}

func readStatus(t *testing.T, c net.Conn, within time.Duration) int {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(within))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer within %v: %v", within, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestStalledBodyIsCutOff: a body that stops arriving fails its read once
// no byte came for BodyIdleTimeout (before: the request waited forever,
// holding its descriptor).
func TestStalledBodyIsCutOff(t *testing.T) {
	addr := startLimited(t, bodyReader, Limits{BodyIdleTimeout: 200 * time.Millisecond})
	c := sendHead(t, addr, 1000, "only ten b")
	if status := readStatus(t, c, 3*time.Second); status != http.StatusRequestTimeout {
		t.Fatalf("stalled body: %d, want 408", status)
	}
	// The server closes the connection after the answer: it is not kept
	// waiting for the rest of the body or a next request.
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("connection after a cut-off body: %v, want EOF", err)
	}
}

// TestTrickleBelowTheMinimumRateIsCutOff: a body that keeps arriving, but
// slower than MinBodyRate, fails after the grace period; the idle deadline
// alone would never fire.
func TestTrickleBelowTheMinimumRateIsCutOff(t *testing.T) {
	addr := startLimited(t, bodyReader, Limits{BodyIdleTimeout: time.Second, MinBodyRate: 10000, BodyRateGrace: 300 * time.Millisecond})
	c := sendHead(t, addr, 100000, "x")
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				if _, err := io.WriteString(c, "0123456789"); err != nil {
					return
				}
			}
		}
	}()
	if status := readStatus(t, c, 3*time.Second); status != http.StatusRequestTimeout {
		t.Fatalf("trickling body: %d, want 408", status)
	}
}

// TestBodyWithinTheLimitsAndAHijackAfterIt: a body that arrives in time is
// read whole, and the deadline is gone once it ended, so a connection taken
// over afterwards is not cut off.
func TestBodyWithinTheLimitsAndAHijackAfterIt(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprint(rw, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n")
		rw.Flush()
		line, _ := rw.ReadString('\n')
		fmt.Fprint(rw, "echo "+line)
		rw.Flush()
	})
	addr := startLimited(t, h, Limits{BodyIdleTimeout: 200 * time.Millisecond})
	c := sendHead(t, addr, 5, "hello")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("hijack: %v %v", resp, err)
	}
	time.Sleep(500 * time.Millisecond) // longer than the body's idle timeout
	io.WriteString(c, "still here\n")
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	line, err := br.ReadString('\n')
	if err != nil || line != "echo still here\n" {
		t.Fatalf("hijacked stream after a pause: %q, %v", line, err)
	}
}

// countingHandler is bodyReader counting the requests inside it.
func countingHandler(in *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in.Add(1)
		defer in.Add(-1)
		bodyReader(w, r)
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestStalledBodyIsShedByRate: a body that stops arriving is cut off once
// it falls below MinBodyRate after the grace, without waiting for the idle
// timeout (before: the read waited the whole BodyIdleTimeout, 30 s by
// default, holding its descriptor).
func TestStalledBodyIsShedByRate(t *testing.T) {
	addr := startLimited(t, bodyReader, Limits{BodyIdleTimeout: 20 * time.Second, MinBodyRate: 1000, BodyRateGrace: 300 * time.Millisecond})
	begin := time.Now()
	c := sendHead(t, addr, 100000, "x")
	if status := readStatus(t, c, 5*time.Second); status != http.StatusRequestTimeout {
		t.Fatalf("stalled body: %d, want 408", status)
	}
	if took := time.Since(begin); took > 3*time.Second {
		t.Fatalf("stalled body cut off after %v, want about the 300ms grace", took)
	}
}

// TestBodiesOverTheClientCapShedTheStalled: a client address past
// MaxBodiesPerClient has its most stalled body shed to make room for the
// new one (before: the address got 503 while it held its cap of stalled
// connections, legitimate clients behind it included); only while none of
// its bodies can be judged stalled yet is the new one 503.
func TestBodiesOverTheClientCapShedTheStalled(t *testing.T) {
	var in atomic.Int32
	addr := startLimited(t, countingHandler(&in), Limits{BodyIdleTimeout: 20 * time.Second, MinBodyRate: 1000, BodyRateGrace: 3 * time.Second, MaxBodiesPerClient: 3})
	var stalled []net.Conn
	for i := 0; i < 3; i++ {
		stalled = append(stalled, sendHead(t, addr, 100000, "x"))
	}
	waitFor(t, "3 stalled bodies in the handler", func() bool { return in.Load() == 3 })
	if status := readStatus(t, sendHead(t, addr, 2, "ok"), 3*time.Second); status != http.StatusServiceUnavailable {
		t.Fatalf("body over the cap while none is judged stalled yet: %d, want 503", status)
	}
	time.Sleep(1100 * time.Millisecond) // past the age at which a body can be judged
	if status := readStatus(t, sendHead(t, addr, 2, "ok"), 3*time.Second); status != http.StatusOK {
		t.Fatalf("body over the cap with stalled ones to shed: %d, want 200", status)
	}
	shed := 0
	for _, c := range stalled {
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestTimeout {
				t.Fatalf("shed body answered %d, want 408", resp.StatusCode)
			}
			shed++
		}
	}
	if shed != 1 {
		t.Fatalf("%d stalled bodies shed for one new body, want 1", shed)
	}
}

// TestConnectionCapShedsTheStalled: at MaxConns a new connection is let in
// by shedding a stalled body; with none stalled it is 503.
func TestConnectionCapShedsTheStalled(t *testing.T) {
	var in atomic.Int32
	addr := startLimited(t, countingHandler(&in), Limits{BodyIdleTimeout: 20 * time.Second, MinBodyRate: 1000, BodyRateGrace: 3 * time.Second, MaxConns: 3})
	for i := 0; i < 3; i++ {
		sendHead(t, addr, 100000, "x")
	}
	waitFor(t, "3 stalled bodies in the handler", func() bool { return in.Load() == 3 })
	if status := readStatus(t, sendHead(t, addr, 2, "ok"), 3*time.Second); status != http.StatusServiceUnavailable {
		t.Fatalf("connection over the cap while none is judged stalled yet: %d, want 503", status)
	}
	time.Sleep(1100 * time.Millisecond)
	if status := readStatus(t, sendHead(t, addr, 2, "ok"), 3*time.Second); status != http.StatusOK {
		t.Fatalf("connection over the cap with stalled bodies to shed: %d, want 200", status)
	}
}

// TestManyStalledUploadsHoldBoundedResources: 200 stalled bodies from one
// client reach the handler at most MaxBodiesPerClient at a time, and every
// one of them has ended shortly after BodyIdleTimeout.
func TestManyStalledUploadsHoldBoundedResources(t *testing.T) {
	var inHandler, peak atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inHandler.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		defer inHandler.Add(-1)
		bodyReader(w, r)
	})
	addr := startLimited(t, h, Limits{BodyIdleTimeout: 300 * time.Millisecond, MaxBodiesPerClient: 20, MaxConns: 1000})
	for i := 0; i < 200; i++ {
		sendHead(t, addr, 1000, strings.Repeat("x", 10))
	}
	deadline := time.Now().Add(5 * time.Second)
	for inHandler.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := inHandler.Load(); n != 0 {
		t.Fatalf("%d stalled requests still held after the idle timeout", n)
	}
	if p := peak.Load(); p > 20 {
		t.Fatalf("%d stalled requests held at once, over the cap of 20", p)
	}
}

// TestWholeBodyIsNeverShed: a request whose body arrived whole (read up to
// its Content-Length, not to EOF) and whose handler then works on is not
// taken for a stalled body when its client's cap is reached.
func TestWholeBodyIsNeverShed(t *testing.T) {
	release := make(chan struct{})
	var in atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 2)
		if _, err := io.ReadFull(r.Body, buf); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		in.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
			http.Error(w, "cancelled", http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, "done")
	})
	addr := startLimited(t, h, Limits{BodyIdleTimeout: 20 * time.Second, MinBodyRate: 1000, BodyRateGrace: 3 * time.Second, MaxBodiesPerClient: 1})
	first := sendHead(t, addr, 2, "ok")
	waitFor(t, "the first request in its handler", func() bool { return in.Load() == 1 })
	time.Sleep(1100 * time.Millisecond)
	second := sendHead(t, addr, 2, "ok")
	waitFor(t, "the second request in its handler", func() bool { return in.Load() == 2 })
	close(release)
	for _, c := range []net.Conn{first, second} {
		if status := readStatus(t, c, 3*time.Second); status != http.StatusOK {
			t.Fatalf("a request whose body arrived whole: %d, want 200", status)
		}
	}
}
