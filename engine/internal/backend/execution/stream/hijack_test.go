package stream

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestHijackHeads(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, rw, err := Hijack(w, r)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		// Echo what the client sends, framed as stdout.
		line, _ := rw.ReadString('\n')
		NewMux(rw, rw.Flush).WriteFrame(Stdout, []byte(line))
	}))
	defer srv.Close()
	for _, tc := range []struct {
		upgrade bool
		status  int
	}{{true, http.StatusSwitchingProtocols}, {false, http.StatusOK}} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		req := "POST /x HTTP/1.1\r\nHost: d\r\nContent-Length: 0\r\n"
		if tc.upgrade {
			req += "Connection: Upgrade\r\nUpgrade: tcp\r\n"
		}
		fmt.Fprintf(conn, "%s\r\nping\n", req)
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != RawStreamType {
			t.Fatalf("upgrade %v: %d %v", tc.upgrade, resp.StatusCode, resp.Header)
		}
		if tc.upgrade && (resp.Header.Get("Upgrade") != "tcp" || resp.Header.Get("Connection") != "Upgrade") {
			t.Fatalf("upgrade headers %v", resp.Header)
		}
		var out bytes.Buffer
		if err := Demux(br, &out, nil); err != nil {
			t.Fatal(err)
		}
		if out.String() != "ping\n" {
			t.Fatalf("echo %q", out.String())
		}
		conn.Close()
	}
}

// TestConmonAttachSocket plays conmon: a SOCK_SEQPACKET socket at a path
// longer than a socket address may be, packets tagged with their pipe.
func TestConmonAttachSocket(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 100))
	path := filepath.Join(dir, "attach")
	ln := listenSeqpacket(t, path)
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.Write([]byte("\x02out"))
		c.Write([]byte("\x03err"))
		c.Write([]byte("\x01ignored"))
		buf := make([]byte, 64)
		n, _ := c.Read(buf)
		got <- buf[:n]
	}()
	conn, err := DialAttach(path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte("typed"))
	select {
	case in := <-got:
		if string(in) != "typed" {
			t.Fatalf("conmon read %q", in)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("input never reached the socket")
	}
	var out, errOut bytes.Buffer
	if err := CopyFromConmon(conn, Output{Stdout: &out, Stderr: &errOut}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "out" || errOut.String() != "err" {
		t.Fatalf("stdout %q stderr %q", out.String(), errOut.String())
	}
	if _, err := DialAttach(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("dialing a missing socket worked")
	}
}

// TestConmonGoneBeforeAccept: conmon exiting with the client's connection
// still in its backlog resets it; the copy reports a ConmonReadError, which
// the handlers log as a warning.
func TestConmonGoneBeforeAccept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "attach")
	ln := listenSeqpacket(t, path)
	conn, err := DialAttach(path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ln.Close()
	var out bytes.Buffer
	err = CopyFromConmon(conn, Output{Stdout: &out})
	var conmonErr *ConmonReadError
	if !errors.As(err, &conmonErr) || !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("copy after conmon left: %v, want a ConmonReadError wrapping ECONNRESET", err)
	}
	if EndLevel(err) != slog.LevelWarn || EndLevel(errors.New("broken pipe")) != slog.LevelDebug || EndLevel(nil) != slog.LevelDebug {
		t.Fatal("EndLevel: want warn for a conmon read error only")
	}
}

// listenSeqpacket binds a SOCK_SEQPACKET listener at path (which may be
// longer than a socket address), as conmon does.
func listenSeqpacket(t *testing.T, path string) net.Listener {
	t.Helper()
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_SEQPACKET, 0)
	if err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), filepath.Base(path))}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 1); err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "attach")
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func TestResizeTerminal(t *testing.T) {
	ctl := filepath.Join(t.TempDir(), "ctl")
	if err := syscall.Mkfifo(ctl, 0o600); err != nil {
		t.Fatal(err)
	}
	// Without a reader (no conmon) the write end cannot open.
	if err := ResizeTerminal(ctl, 24, 80); err == nil {
		t.Fatal("resize without conmon succeeded")
	}
	reader, err := os.OpenFile(ctl, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	if err := ResizeTerminal(ctl, 24, 80); err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(io.LimitReader(reader, 64))
	if string(msg) != "1 24 80\n" {
		t.Fatalf("control message %q", msg)
	}
}

// TestHijackCloseWithUnreadInput: a session that ends while the client's
// input is still unread (a shell that exited before the terminal's last
// keys) closes without a reset, so the client reads the stream to its end
// and not "connection reset by peer" (docker run -it then failed with exit
// 1 instead of the container's code, in a loaded CI run). Before, Close
// with unread bytes in the socket made the kernel answer with RST.
func TestHijackCloseWithUnreadInput(t *testing.T) {
	sent := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, rw, err := Hijack(w, r)
		if err != nil {
			t.Error(err)
			return
		}
		<-sent
		time.Sleep(100 * time.Millisecond) // the input is in the socket, unread
		NewMux(rw, rw.Flush).WriteFrame(Stdout, []byte("bye\n"))
		conn.Close()
	}))
	defer srv.Close()
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /x HTTP/1.1\r\nHost: d\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n")
	br := bufio.NewReader(conn)
	if _, err := http.ReadResponse(br, nil); err != nil {
		t.Fatal(err)
	}
	conn.Write(bytes.Repeat([]byte("keys the session never read\n"), 100))
	close(sent)
	var out bytes.Buffer
	if err := Demux(br, &out, nil); err != nil {
		t.Fatalf("reading the stream to its end: %v (got %q)", err, out.String())
	}
	if out.String() != "bye\n" {
		t.Fatalf("stream %q", out.String())
	}
	// The client may go on writing a while (its stdin copy): no reset.
	for i := 0; i < 5; i++ {
		if _, err := conn.Write([]byte("more\n")); err != nil {
			t.Fatalf("write %d after the end: %v", i, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
