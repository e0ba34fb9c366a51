package dockercli

import (
	"archive/tar"
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestBuildKeepsTheConnection: a build whose context has bytes after the
// tar's end marker (the record padding tar(1) and docker-py write) answers,
// and the same connection then serves the next request. The full-duplex
// build handler used to leave those bytes unread, and net/http panicked on
// the connection's next request (golang/go#68560).
func TestBuildKeepsTheConnection(t *testing.T) {
	te := startEngine(t)
	var ctx bytes.Buffer
	tw := tar.NewWriter(&ctx)
	dockerfile := []byte("FROM localhost/busybox:latest\nLABEL keep=alive\n")
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(dockerfile))}); err != nil {
		t.Fatal(err)
	}
	tw.Write(dockerfile)
	tw.Close()
	ctx.Write(make([]byte, 8192)) // padding to a 10 KiB record, as tar(1) writes

	conn, err := net.DialTimeout("tcp", te.Addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(60 * time.Second))
	br := bufio.NewReader(conn)
	fmt.Fprintf(conn, "POST /v1.41/build?t=localhost/keepalive:1 HTTP/1.1\r\nHost: d\r\nContent-Type: application/x-tar\r\nContent-Length: %d\r\n\r\n", ctx.Len())
	conn.Write(ctx.Bytes())
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("Successfully built")) {
		t.Fatalf("build: %s\n%s", resp.Status, body)
	}
	fmt.Fprintf(conn, "GET /v1.41/_ping HTTP/1.1\r\nHost: d\r\n\r\n")
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the request after the build on the same connection: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("ping after the build: %s", resp.Status)
	}
}
