package dockercli

import (
	"strings"
	"testing"
)

// TestInfoCountsContainers: docker info and podman info count containers by
// state: one running, one paused, one created (stopped).
func TestInfoCountsContainers(t *testing.T) {
	te := startEngine(t)
	te.run("docker", "run", "-d", "--name", "counted-running", "localhost/busybox:latest", "sleep", "300")
	te.run("docker", "run", "-d", "--name", "counted-paused", "localhost/busybox:latest", "sleep", "300")
	te.run("docker", "pause", "counted-paused")
	te.run("docker", "create", "--name", "counted-created", "localhost/busybox:latest", "true")
	if got := strings.TrimSpace(te.run("docker", "info", "--format", "{{.Containers}} {{.ContainersRunning}} {{.ContainersPaused}} {{.ContainersStopped}}")); got != "3 1 1 1" {
		t.Fatalf("docker info counts %q, want 3 1 1 1", got)
	}
	if got := strings.TrimSpace(te.run("podman", "info", "--format", "{{.Store.ContainerStore.Number}} {{.Store.ContainerStore.Running}} {{.Store.ContainerStore.Paused}} {{.Store.ContainerStore.Stopped}}")); got != "3 1 1 1" {
		t.Fatalf("podman info counts %q, want 3 1 1 1", got)
	}
	te.run("docker", "rm", "-f", "counted-running", "counted-paused", "counted-created")
}
