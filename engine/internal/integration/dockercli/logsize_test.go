package dockercli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDockerLogMaxSize: docker run --log-opt max-size (with max-file, as
// Compose files write it) bounds the container's log file: conmon starts it
// over when it would grow past the size, so after 2,000 lines the file is
// under the limit and docker logs shows the last lines only. Inspect shows
// the limit; options the engine cannot honour are refused naming them.
func TestDockerLogMaxSize(t *testing.T) {
	te := startEngine(t)
	te.run("docker", "run", "-d", "--name", "chatty", "--log-opt", "max-size=4k", "--log-opt", "max-file=3",
		"localhost/busybox:latest", "sh", "-c", "i=0; while [ $i -lt 2000 ]; do echo line-$i-padding-padding; i=$((i+1)); done; echo done; sleep 300")
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(te.run("docker", "logs", "--tail", "1", "chatty"), "done") {
		if time.Now().After(deadline) {
			t.Fatal("the container did not finish writing its lines")
		}
		time.Sleep(100 * time.Millisecond)
	}
	path := strings.TrimSpace(te.run("docker", "inspect", "--format", "{{.LogPath}}", "chatty"))
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Size() > 4096 {
		t.Fatalf("the log file holds %d bytes, over max-size 4k", info.Size())
	}
	logs := te.run("docker", "logs", "chatty")
	if !strings.Contains(logs, "line-1999-") || strings.Contains(logs, "line-0-") {
		t.Fatalf("docker logs after the limit:\n%s", logs)
	}
	if got := strings.TrimSpace(te.run("docker", "inspect", "--format", "{{index .HostConfig.LogConfig.Config \"max-size\"}}", "chatty")); got != "4096" {
		t.Fatalf("inspect shows max-size %q, want 4096", got)
	}
	te.run("docker", "rm", "-f", "chatty")

	for opt, want := range map[string]string{"compress=true": "compress", "labels=a": "labels", "max-size=lots": "max-size", "max-file=0": "max-file"} {
		contains(t, "docker run --log-opt "+opt, te.fails("docker", "run", "--rm", "--log-opt", opt, "localhost/busybox:latest", "true"), want)
	}
}

// TestLogDriverNone: docker and podman run --log-driver none show the
// output to the attached client and keep no log: logs is refused naming
// the driver (501, as dockerd answers), inspect says none, and no log file
// is written; options with it are refused.
func TestLogDriverNone(t *testing.T) {
	te := startEngine(t)
	for _, client := range []string{"docker", "podman"} {
		name := client + "-nolog"
		if out := te.run(client, "run", "--name", name, "--log-driver", "none", "localhost/busybox:latest", "echo", "shown"); !strings.Contains(out, "shown") {
			t.Errorf("%s run --log-driver none: attached output %q", client, out)
		}
		// podman 4.3.1's client reads any answer to logs as a stream (it
		// fails on the error's bytes); later clients print the message.
		if out := te.fails(client, "logs", name); client == "docker" && !strings.Contains(out, "configured logging driver does not support reading") {
			t.Errorf("docker logs: %q", out)
		}
		if got := strings.TrimSpace(te.run(client, "inspect", "--format", "{{.HostConfig.LogConfig.Type}}", name)); got != "none" {
			t.Errorf("%s inspect LogConfig.Type %q", client, got)
		}
	}
	if logs, _ := filepath.Glob(filepath.Join(te.Root, "*", "*", "*", "userdata", "ctr.log")); len(logs) > 0 {
		t.Errorf("a log file was written: %v", logs)
	}
	status, body := te.Do("GET", "/containers/podman-nolog/logs?stdout=true", nil)
	if status != 501 || !strings.Contains(string(body), "cannot read logs: this container is not logging output") {
		t.Errorf("libpod logs of a none container: %d %s", status, body)
	}
	status, _, body = te.Exchange("POST", "http://"+te.Addr+"/v1.44/containers/create", "application/json",
		strings.NewReader(`{"Image":"localhost/busybox","HostConfig":{"LogConfig":{"Type":"none","Config":{"max-size":"1m"}}}}`))
	if status != 400 || !strings.Contains(string(body), "LogConfig") {
		t.Errorf("none with an option: %d %s", status, body)
	}
}
