package testnet

import (
	"net/http"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// Server is a server process a test started itself (Prometheus, Podman's
// service, an engine binary), stopped when the test ends.
type Server struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // how the process ended, once exited is closed
}

// StartServer starts cmd, named name in failures, and stops it when the test
// ends: SIGTERM, then SIGKILL after grace. With mustStop a server that only
// SIGKILL ended fails the test. Cleanups the caller registered before
// (removing the server's files, closing its log) run after the stop.
func StartServer(t testing.TB, name string, cmd *exec.Cmd, grace time.Duration, mustStop bool) *Server {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	s := &Server{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() { s.err = cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(grace):
			_ = cmd.Process.Kill()
			<-s.exited
			if mustStop {
				t.Errorf("%s did not stop on SIGTERM within %v", name, grace)
			}
		}
	})
	return s
}

// WaitReady polls url until it answers 200, for at most within; the test
// fails when the server exits first or the time runs out, the failure
// followed by what log answers (its output; nil for none).
func (s *Server) WaitReady(t testing.TB, url string, within time.Duration, log func() string) {
	t.Helper()
	tail := func() string {
		if log == nil {
			return ""
		}
		return "\n" + log()
	}
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(within)
	for {
		select {
		case <-s.exited:
			t.Fatalf("%s exited during start-up: %v%s", s.name, s.err, tail())
		default:
		}
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer %s within %v%s", s.name, url, within, tail())
		}
		select {
		case <-s.exited:
		case <-time.After(100 * time.Millisecond):
		}
	}
}
