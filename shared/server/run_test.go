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
	"testing"
	"time"
)

// startRun runs h on a fresh loopback listener and returns the base URL, a
// cancel function for Run's context and the channel Run's result arrives on.
func startRun(t *testing.T, h http.Handler, shutdownTimeout time.Duration) (string, context.CancelFunc, <-chan error) {
	t.Helper()
	ln, err := Listen("tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- Run(ctx, ln, h, slog.New(slog.DiscardHandler), shutdownTimeout) }()
	return "http://" + ln.Addr().String(), cancel, done
}

func waitRun(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
		return nil
	}
}

func TestRunFinishesInFlightRequests(t *testing.T) {
	started := make(chan struct{})
	release := make(chan struct{})
	handlerCtxErr := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
		handlerCtxErr <- r.Context().Err()
		fmt.Fprint(w, "finished")
	})
	url, cancel, done := startRun(t, h, 10*time.Second)

	type result struct {
		body string
		err  error
	}
	response := make(chan result, 1)
	go func() {
		resp, err := http.Get(url + "/slow")
		if err != nil {
			response <- result{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		response <- result{body: string(body), err: err}
	}()
	<-started
	cancel()

	// Shutdown stops accepting before the in-flight request ends.
	host := strings.TrimPrefix(url, "http://")
	deadline := time.Now().Add(5 * time.Second)
	for {
		conn, err := net.Dial("tcp", host)
		if err != nil {
			break
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatal("listener still accepting after cancel")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("Run returned %v while a request was in flight", err)
	default:
	}

	close(release)
	got := <-response
	if got.err != nil || got.body != "finished" {
		t.Fatalf("in-flight request got %q, %v; want it answered", got.body, got.err)
	}
	if err := <-handlerCtxErr; err != nil {
		t.Fatalf("request context was cancelled during graceful shutdown: %v", err)
	}
	if err := waitRun(t, done); err != nil {
		t.Fatalf("Run = %v, want nil after a clean shutdown", err)
	}
}

func TestRunShuttingDownEndsStreams(t *testing.T) {
	streaming := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "event 1")
		http.NewResponseController(w).Flush()
		close(streaming)
		<-ShuttingDown(r.Context())
		fmt.Fprintln(w, "bye")
	})
	url, cancel, done := startRun(t, h, 30*time.Second)
	resp, err := http.Get(url + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	<-streaming
	start := time.Now()
	cancel()
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != "event 1\nbye\n" {
		t.Fatalf("stream body %q, %v", body, err)
	}
	if err := waitRun(t, done); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Fatalf("shutdown took %v, the stream should have ended at once", elapsed)
	}
}

func TestRunShutdownTimeoutCancelsRequests(t *testing.T) {
	started := make(chan struct{})
	handlerDone := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
		handlerDone <- r.Context().Err()
	})
	url, cancel, done := startRun(t, h, 200*time.Millisecond)
	go func() {
		resp, err := http.Get(url + "/stuck")
		if err == nil {
			resp.Body.Close()
		}
	}()
	<-started
	cancel()
	err := waitRun(t, done)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run = %v, want a shutdown timeout error", err)
	}
	select {
	case ctxErr := <-handlerDone:
		if !errors.Is(ctxErr, context.Canceled) {
			t.Fatalf("handler context error %v", ctxErr)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("stuck handler's context was never cancelled")
	}
}

func TestRunReturnsServeErrors(t *testing.T) {
	ln, err := Listen("tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	err = Run(context.Background(), ln, http.NotFoundHandler(), nil, time.Second)
	if err == nil || !strings.Contains(err.Error(), "serve on tcp://127.0.0.1:") {
		t.Fatalf("Run on a closed listener = %v, want a serve error", err)
	}
}

func TestRunOnUnixSocket(t *testing.T) {
	path := t.TempDir() + "/api.sock"
	ln, err := Listen("unix://" + path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, "over unix")
		}), nil, time.Second)
	}()
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(conn, "GET /_ping HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	conn.Close()
	if string(body) != "over unix" {
		t.Fatalf("body %q", body)
	}
	cancel()
	if err := waitRun(t, done); err != nil {
		t.Fatal(err)
	}
	// The socket file goes with the listener, so the next start is clean.
	if _, err := net.Dial("unix", path); err == nil {
		t.Fatal("socket still accepting after Run returned")
	}
}
