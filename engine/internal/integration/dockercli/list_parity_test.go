package dockercli

import (
	"strings"
	"testing"
)

// TestDockerListAsDockerd: docker ps and inspect show the image as the
// create named it ("localhost/busybox", not the resolved
// "localhost/busybox:latest") and the command as dockerd writes it, each
// argument holding a space in single quotes (compared with dockerd 20.10).
func TestDockerListAsDockerd(t *testing.T) {
	te := startEngine(t)
	te.run("docker", "create", "--name", "ps-shown", "localhost/busybox", "sh", "-c", "echo a b; exit 3")
	got := te.run("docker", "ps", "-a", "--filter", "name=ps-shown", "--no-trunc", "--format", "{{.Image}}|{{.Command}}")
	if want := `localhost/busybox|"sh -c 'echo a b; exit 3'"`; strings.TrimSpace(got) != want {
		t.Errorf("docker ps: %s, want %s", got, want)
	}
	if got := te.run("docker", "inspect", "-f", "{{.Config.Image}}", "ps-shown"); strings.TrimSpace(got) != "localhost/busybox" {
		t.Errorf("inspect's Config.Image: %s", got)
	}
}
