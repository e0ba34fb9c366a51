package server

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestListenTCP(t *testing.T) {
	ln, err := Listen("tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if ln.Addr().Network() != "tcp" || !strings.HasPrefix(ln.Addr().String(), "127.0.0.1:") {
		t.Fatalf("listening on %s %s", ln.Addr().Network(), ln.Addr())
	}
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	conn.Close()
}

func TestListenUnixCreatesParentDir(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "berth", "berth.sock")
	ln, err := Listen("unix://" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	info, err := os.Stat(path)
	if err != nil || info.Mode()&os.ModeSocket == 0 {
		t.Fatalf("no socket at %s: %v", path, err)
	}
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	conn.Close()
}

func TestListenUnixRemovesStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "berth.sock")
	// A socket file nobody listens on, as a killed process leaves it.
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("stale socket not left behind: %v", err)
	}
	ln, err := Listen("unix://" + path)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	defer ln.Close()
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	conn.Close()
}

func TestListenUnixRefusesLiveSocketAndOtherFiles(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "live.sock")
	first, err := Listen("unix://" + live)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if _, err := Listen("unix://" + live); err == nil || !strings.Contains(err.Error(), "another process") {
		t.Fatalf("second Listen on a live socket: %v, want an error", err)
	}
	// The first listener must still work.
	conn, err := net.Dial("unix", live)
	if err != nil {
		t.Fatalf("live socket broken by second Listen: %v", err)
	}
	conn.Close()

	regular := filepath.Join(dir, "data")
	if err := os.WriteFile(regular, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen("unix://" + regular); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("Listen on a regular file: %v, want an error", err)
	}
	if data, err := os.ReadFile(regular); err != nil || string(data) != "keep me" {
		t.Fatalf("regular file damaged: %q, %v", data, err)
	}
}

func TestListenRejectsBadAddresses(t *testing.T) {
	tests := []struct {
		addr    string
		wantMsg string
	}{
		{"127.0.0.1:8080", "want tcp://HOST:PORT or unix:///PATH"},
		{"/run/berth.sock", "want tcp://HOST:PORT or unix:///PATH"},
		{"http://127.0.0.1:8080", `unsupported scheme "http"`},
		{"udp://127.0.0.1:8080", `unsupported scheme "udp"`},
		{"tcp://127.0.0.1", "missing port"},
		{"tcp://127.0.0.1:8080/path", "without a path"},
		{"tcp://127.0.0.1:99999", "invalid port"},
		{"unix://", "empty socket path"},
		{"unix:///" + strings.Repeat("a", 200), "longer than"},
	}
	for _, tt := range tests {
		ln, err := Listen(tt.addr)
		if err == nil {
			ln.Close()
			t.Errorf("Listen(%q) succeeded, want an error", tt.addr)
			continue
		}
		if !strings.Contains(err.Error(), tt.wantMsg) {
			t.Errorf("Listen(%q) error %q, want it to contain %q", tt.addr, err, tt.wantMsg)
		}
	}
}
