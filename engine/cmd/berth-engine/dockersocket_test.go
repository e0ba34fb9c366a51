package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
)

// TestDockerSocket: --docker-socket serves the same engine on a unix
// socket besides the TCP listener: Docker's _ping and version answer there.
func TestDockerSocket(t *testing.T) {
	testdeadline.Set(t, testdeadline.Default)
	sock := filepath.Join(t.TempDir(), "docker.sock")
	startEngine(t, "127.0.0.1", "--docker-socket", sock)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	resp, err := c.Get("http://docker/_ping")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Api-Version") == "" {
		t.Fatalf("_ping on the socket: %d, Api-Version %q", resp.StatusCode, resp.Header.Get("Api-Version"))
	}
	resp, err = c.Get("http://docker/v1.41/version")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		APIVersion string `json:"ApiVersion"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != http.StatusOK || v.APIVersion == "" {
		t.Fatalf("version on the socket: %d %+v %v", resp.StatusCode, v, err)
	}
}

func TestDockerSocketMustBeAbsolute(t *testing.T) {
	err := run(context.Background(), []string{"berth-engine", "--listen", "tcp://127.0.0.1:0", "--docker-socket", "docker.sock"},
		func(string) string { return "" }, nil, nil)
	if err == nil {
		t.Fatal("a relative --docker-socket was accepted")
	}
}
