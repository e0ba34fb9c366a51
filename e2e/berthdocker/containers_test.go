package berthdocker

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"
)

// httpdRequest is a busybox web server serving "hello" on port 80.
func httpdRequest() testcontainers.ContainerRequest {
	return testcontainers.ContainerRequest{
		Image:        "localhost/busybox:latest",
		Cmd:          []string{"sh", "-c", "mkdir -p /www && echo hello > /www/index.html && echo serving && exec httpd -f -p 80 -h /www"},
		ExposedPorts: []string{"80/tcp"},
		WaitingFor: wait.ForAll(
			wait.ForLog("serving"),
			wait.ForHTTP("/").WithPort("80/tcp").WithStartupTimeout(30*time.Second),
		),
	}
}

// TestGenericContainer: a generic container with log and HTTP wait
// strategies, its mapped port, exec, and copies both ways.
func TestGenericContainer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{ContainerRequest: httpdRequest(), Started: true})
	testcontainers.CleanupContainer(t, c)
	if err != nil {
		t.Fatal(err)
	}
	endpoint, err := c.PortEndpoint(ctx, "80/tcp", "http")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(endpoint + "/index.html")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello\n" {
		t.Fatalf("GET %s: %q", endpoint, body)
	}

	code, out, err := c.Exec(ctx, []string{"sh", "-c", "echo from-exec; exit 4"})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(out)
	if code != 4 || !strings.Contains(string(data), "from-exec") {
		t.Fatalf("exec: code %d output %q", code, data)
	}

	if err := c.CopyToContainer(ctx, []byte("copied\n"), "/www/copied.txt", 0o644); err != nil {
		t.Fatal(err)
	}
	rc, err := c.CopyFileFromContainer(ctx, "/www/copied.txt")
	if err != nil {
		t.Fatal(err)
	}
	data, _ = io.ReadAll(rc)
	rc.Close()
	if string(data) != "copied\n" {
		t.Fatalf("copied back %q", data)
	}
	state, err := c.State(ctx)
	if err != nil || !state.Running {
		t.Fatalf("state %+v %v", state, err)
	}
}

// TestNetworkAliases: two containers on a network testcontainers creates;
// one reaches the other by its alias.
func TestNetworkAliases(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nw, err := network.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	testcontainers.CleanupNetwork(t, nw)
	req := httpdRequest()
	req.Networks = []string{nw.Name}
	req.NetworkAliases = map[string][]string{nw.Name: {"web"}}
	server, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{ContainerRequest: req, Started: true})
	testcontainers.CleanupContainer(t, server)
	if err != nil {
		t.Fatal(err)
	}
	client, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:      "localhost/busybox:latest",
			Cmd:        []string{"sh", "-c", "wget -q -O - http://web/index.html"},
			Networks:   []string{nw.Name},
			WaitingFor: wait.ForExit().WithExitTimeout(30 * time.Second),
		},
		Started: true,
	})
	testcontainers.CleanupContainer(t, client)
	if err != nil {
		t.Fatal(err)
	}
	logs, err := client.Logs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(logs)
	if !strings.Contains(string(data), "hello") {
		t.Fatalf("the client read %q through the alias", data)
	}
}
