package dockercli

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/berth-project/berth/shared/testnet"
)

// samePortComposeFile has two services publishing one host port; the
// second is in a profile, so up starts the first alone.
const samePortComposeFile = `services:
  first:
    image: localhost/busybox:latest
    command: ["sleep", "300"]
    ports: ["127.0.0.1:%[1]s:80"]
    stop_grace_period: 1s
  second:
    image: localhost/busybox:latest
    command: ["sleep", "300"]
    ports: ["127.0.0.1:%[1]s:80"]
    stop_grace_period: 1s
    profiles: [second]
`

// composeFails runs a docker compose command of composeProject's project
// that must fail and returns its standard error.
func composeFails(te *testEngine, name string, args ...string) string {
	te.T.Helper()
	project := filepath.Join(te.Dir, "project")
	return te.fails("docker", append([]string{"compose", "--project-directory", project, "-p", name}, args...)...)
}

// TestComposeHostPortTakenAsDockerd: a service publishing a host port that
// a running service holds does not start, with dockerd's words, as on
// dockerd (both started before, and the second never got the traffic).
func TestComposeHostPortTakenAsDockerd(t *testing.T) {
	port := strconv.Itoa(testnet.FreePort(t))
	te, dc := composeProject(t, "bp", map[string]string{"compose.yaml": fmt.Sprintf(samePortComposeFile, port)})
	dc("up", "-d")
	errOut := composeFails(te, "bp", "--profile", "second", "up", "-d", "second")
	contains(t, "compose up of a second service on the port", errOut, "Bind for 127.0.0.1:"+port+" failed: port is already allocated")
	ps := dc("--profile", "second", "ps", "-a", "--format", "{{.Service}} {{.State}}")
	contains(t, "compose ps", ps, "first running")
	contains(t, "compose ps", ps, "second created")
	dc("--profile", "second", "down")
}

// TestComposeStateRefusalsAsDockerd: compose pause of a paused service,
// unpause of a running one, kill with an unknown signal and docker pause
// of a stopped container fail with dockerd's words (the engine's before:
// "container NAME is paused, not running: object state does not allow this
// operation", "invalid signal: invalid signal: NOPE").
func TestComposeStateRefusalsAsDockerd(t *testing.T) {
	te, dc := composeProject(t, "bs", map[string]string{"compose.yaml": `services:
  app:
    image: localhost/busybox:latest
    command: ["sleep", "300"]
    stop_grace_period: 1s
`})
	dc("up", "-d")
	contains(t, "compose unpause of a running service", composeFails(te, "bs", "unpause", "app"), "is not paused")
	dc("pause", "app")
	contains(t, "compose pause of a paused service", composeFails(te, "bs", "pause", "app"), "is already paused")
	dc("unpause", "app")
	errOut := composeFails(te, "bs", "kill", "-s", "NOPE", "app")
	contains(t, "compose kill -s NOPE", errOut, "Error response from daemon: Invalid signal: NOPE")
	dc("stop", "app")
	contains(t, "docker pause of a stopped container", te.fails("docker", "pause", "bs-app-1"), "is not running")
	dc("down")
	if out := te.run("docker", "ps", "-aq"); strings.TrimSpace(out) != "" {
		t.Fatalf("compose down left containers: %q", out)
	}
}

// TestDockerHostPortHeldByProcess: a host port a host process listens on
// fails docker run's start as dockerd's userland proxy fails it ("Error
// starting userland proxy: listen tcp4 ADDR: bind: address already in
// use"), and the container stays created, as dockerd leaves it. Before,
// the container started and took the process's traffic. Once the process
// is gone the container starts and its conmon holds the port.
func TestDockerHostPortHeldByProcess(t *testing.T) {
	te := startEngine(t)
	addr := testnet.FreeAddr(t)
	l, err := net.Listen("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	errOut := te.fails("docker", "run", "-d", "--name", "blocked", "-p", addr+":80", "localhost/busybox:latest", "sleep", "300")
	contains(t, "docker run on a port a process holds", errOut,
		"driver failed programming external connectivity on endpoint blocked (")
	contains(t, "docker run on a port a process holds", errOut,
		"Error starting userland proxy: listen tcp4 "+addr+": bind: address already in use")
	contains(t, "docker ps -a", te.run("docker", "ps", "-a", "--format", "{{.Names}} {{.State}}"), "blocked created")
	l.Close()
	te.run("docker", "start", "blocked")
	if l, err := net.Listen("tcp4", addr); err == nil {
		l.Close()
		t.Fatalf("%s is free while blocked runs", addr)
	}
	te.run("docker", "rm", "-f", "blocked")
}
