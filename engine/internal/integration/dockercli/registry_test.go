package dockercli

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/shared/testnet"

	"strconv"
)

// TestDockerPushPull: docker push to a local registry (distribution 2.8),
// docker rmi, docker pull with Docker's progress stream, then a run of the
// pulled image.
func TestDockerPushPull(t *testing.T) {
	enginetest.Require(t, "the docker push and pull test", "docker-registry")
	te := startEngine(t)
	port := startRegistry(t, te.Dir)
	ref := "127.0.0.1:" + port + "/bb:1"
	te.run("docker", "tag", "localhost/busybox:latest", ref)
	contains(t, "docker push", te.run("docker", "push", ref), "digest: sha256:")
	te.run("docker", "rmi", ref)
	out := te.run("docker", "pull", ref)
	contains(t, "docker pull", out, "Status: Downloaded newer image for "+ref)
	contains(t, "docker images", te.run("docker", "images", "--format", "{{.Repository}}:{{.Tag}}"), ref)
	if out := te.run("docker", "run", "--rm", ref, "echo", "pulled"); strings.TrimSpace(out) != "pulled" {
		t.Fatalf("run of the pulled image: %q", out)
	}
}

// startRegistry serves a docker-registry (distribution 2.8) on a free
// loopback port with its storage under dir, until the test ends, and
// answers the port.
func startRegistry(t testing.TB, dir string) string {
	t.Helper()
	enginetest.Require(t, "a local registry", "docker-registry")
	port := strconv.Itoa(testnet.FreePort(t))
	config := filepath.Join(dir, "registry.yml")
	err := os.WriteFile(config, []byte(fmt.Sprintf("version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:%s\n",
		filepath.Join(dir, "registry"), port)), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	reg := exec.Command("docker-registry", "serve", config)
	if err := reg.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Process.Kill(); _ = reg.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
		if err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the registry did not listen: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return port
}
