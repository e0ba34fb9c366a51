package dockercli

import (
	"strings"
	"testing"
	"time"
)

// TestDockerRmiForceKeepsContainers: docker rmi of an image a container
// uses is refused (409) without -f; with -f the image loses its name and the
// container stays, as with dockerd (Podman's force would remove the
// container). Removed by ID with -f, every name goes. The container still
// starts, and once it is gone an image prune removes the dangling image.
func TestDockerRmiForceKeepsContainers(t *testing.T) {
	te := startEngine(t)
	te.run("docker", "tag", "localhost/busybox:latest", "keep:1")
	te.run("docker", "tag", "localhost/busybox:latest", "keep:2")
	id := strings.TrimSpace(te.run("docker", "image", "inspect", "--format", "{{.Id}}", "keep:1"))
	ctr := strings.TrimSpace(te.run("docker", "create", "--name", "rmi-user", "keep:1", "echo", "still here"))

	te.run("docker", "rmi", "keep:2") // one name of several: untagged only
	te.run("docker", "rmi", "localhost/busybox:latest")
	contains(t, "docker rmi without -f", te.fails("docker", "rmi", "keep:1"),
		`conflict: unable to remove repository reference "keep:1" (must force) - container `+ctr[:12]+" is using its referenced image")
	out := te.run("docker", "rmi", "-f", "keep:1")
	contains(t, "docker rmi -f", out, "Untagged: keep:1")
	if strings.Contains(out, "Deleted:") {
		t.Fatalf("docker rmi -f reported the image deleted while a container uses it:\n%s", out)
	}
	if got := strings.TrimSpace(te.run("docker", "ps", "-a", "--filter", "name=rmi-user", "--format", "{{.Names}}")); got != "rmi-user" {
		t.Fatalf("docker rmi -f removed the container: ps -a shows %q", got)
	}
	if got := strings.TrimSpace(te.run("docker", "image", "inspect", "--format", "{{len .RepoTags}}", id)); got != "0" {
		t.Fatalf("the image still has %s names", got)
	}
	if out := te.run("docker", "start", "-a", "rmi-user"); strings.TrimSpace(out) != "still here" {
		t.Fatalf("the container after the image's removal: %q", out)
	}

	// By ID: every name goes, the container stays.
	te.run("docker", "tag", id, "keep:3")
	te.run("docker", "tag", id, "keep:4")
	contains(t, "docker rmi -f ID", te.run("docker", "rmi", "-f", id), "Untagged: keep:")
	if got := strings.TrimSpace(te.run("docker", "image", "inspect", "--format", "{{len .RepoTags}}", id)); got != "0" {
		t.Fatalf("after docker rmi -f ID the image still has %s names", got)
	}
	te.run("docker", "rm", "rmi-user")
	contains(t, "docker image prune", te.run("docker", "image", "prune", "-f"), strings.TrimPrefix(id, "sha256:"))
	te.fails("docker", "image", "inspect", id)
}

// TestDockerRmForceKillsAtOnce: docker rm -f of a running container whose
// process ignores SIGTERM (sleep as PID 1) kills it at once, as dockerd
// does, instead of waiting out the 10 s stop timeout.
func TestDockerRmForceKillsAtOnce(t *testing.T) {
	te := startEngine(t)
	te.run("docker", "run", "-d", "--name", "stubborn", "localhost/busybox:latest", "sleep", "300")
	start := time.Now()
	te.run("docker", "rm", "-f", "stubborn")
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("docker rm -f took %v: it waited for the stop timeout", took)
	}
	te.fails("docker", "inspect", "stubborn")
}
