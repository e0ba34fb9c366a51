package dockercli

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
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

// TestExecIDsListed: inspect lists a container's exec sessions: Docker's
// those not ended (a detached one running), null where none, as dockerd;
// libpod's every session the engine keeps, as Podman's. Before, both
// lists were always empty.
func TestExecIDsListed(t *testing.T) {
	te := startEngine(t)
	te.run("docker", "run", "-d", "--name", "execs", "localhost/busybox:latest", "sleep", "300")
	if got := strings.TrimSpace(te.run("docker", "inspect", "-f", "{{json .ExecIDs}}", "execs")); got != "null" {
		t.Fatalf("ExecIDs before any exec: %s", got)
	}
	te.run("docker", "exec", "execs", "true")
	te.run("docker", "exec", "-d", "execs", "sleep", "100")
	// The attached exec's end is recorded just after the CLI returns.
	var docker []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		docker = nil
		json.Unmarshal([]byte(te.run("docker", "inspect", "-f", "{{json .ExecIDs}}", "execs")), &docker)
		if len(docker) == 1 || time.Now().After(deadline) {
			break
		}
	}
	if len(docker) != 1 {
		t.Fatalf("Docker's ExecIDs with one exec ended and one running: %q", docker)
	}
	var libpod struct{ ExecIDs []string }
	te.Decode(te.Must(http.StatusOK, "GET", "/containers/execs/json", nil), &libpod)
	if len(libpod.ExecIDs) != 2 || libpod.ExecIDs[1] != docker[0] {
		t.Fatalf("libpod's ExecIDs: %q (Docker's %q)", libpod.ExecIDs, docker)
	}
	var running struct{ Running bool }
	te.Decode(te.Must(http.StatusOK, "GET", "/exec/"+docker[0]+"/json", nil), &running)
	if !running.Running {
		t.Fatalf("the listed session %s is not running", docker[0])
	}
}

// TestPredefinedNetworkEndpoints: a container in network mode none or
// host is on dockerd's network of that name in ps and inspect, with that
// network's ID, as dockerd lists it (before: no network at all).
func TestPredefinedNetworkEndpoints(t *testing.T) {
	te := startEngine(t)
	for _, mode := range []string{"none", "host"} {
		name := "on-" + mode
		te.run("docker", "create", "--name", name, "--network", mode, "localhost/busybox:latest", "true")
		id := strings.TrimSpace(te.run("docker", "network", "inspect", "-f", "{{.Id}}", mode))
		got := te.run("docker", "inspect", "-f", `{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{$v.NetworkID}}{{end}}`, name)
		if strings.TrimSpace(got) != mode+" "+id {
			t.Errorf("inspect of a container in %s: %q, want %q", mode, got, mode+" "+id)
		}
		ps := te.run("docker", "ps", "-a", "--filter", "name="+name, "--format", "{{.Networks}}")
		if strings.TrimSpace(ps) != mode {
			t.Errorf("docker ps of a container in %s: networks %q", mode, ps)
		}
	}
}
