package dockercli

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDockerEventNames: docker events names removals as dockerd does
// (a network or volume "destroy", an image "delete") and filters by those
// names.
func TestDockerEventNames(t *testing.T) {
	te := startEngine(t)
	te.run("docker", "network", "create", "ev-net")
	te.run("docker", "network", "rm", "ev-net")
	te.run("docker", "volume", "create", "ev-vol")
	te.run("docker", "volume", "rm", "ev-vol")
	te.run("docker", "tag", "localhost/busybox:latest", "localhost/ev-image:1")
	te.run("docker", "rmi", "localhost/ev-image:1")
	te.fails("docker", "run", "--name", "ev-exit", "--label", "team=a", "localhost/busybox:latest", "sh", "-c", "exit 3")
	te.run("docker", "run", "-d", "--name", "ev-run", "localhost/busybox:latest", "sleep", "300")
	te.fails("docker", "exec", "ev-run", "sh", "-c", "exit 5")
	netID := strings.TrimSpace(te.run("docker", "network", "create", "ev-conn"))
	te.run("docker", "network", "connect", "ev-conn", "ev-run")
	runID := strings.TrimSpace(te.run("docker", "inspect", "-f", "{{.Id}}", "ev-run"))
	// The CLI sends --until in whole seconds: events of the current second
	// come after it, with dockerd as here.
	time.Sleep(1100 * time.Millisecond)
	all := te.run("docker", "events", "--since", "5m", "--until", "0s", "--format", "{{.Type}} {{.Action}} {{.Actor.Attributes.name}}")
	for _, want := range []string{"network create ev-net", "network destroy ev-net", "volume create", "volume destroy", "image tag", "image untag"} {
		contains(t, "docker events", all, want)
	}
	filtered := te.run("docker", "events", "--since", "5m", "--until", "0s", "--filter", "event=destroy", "--format", "{{.Type}} {{.Action}}")
	contains(t, "event=destroy", filtered, "network destroy")
	contains(t, "event=destroy", filtered, "volume destroy")

	// The actors and attributes dockerd gives (Podman's containerExitCode
	// and podId are not among them).
	attrs := te.run("docker", "events", "--since", "5m", "--until", "0s", "--format", "{{.Type}} {{.Action}} {{.Actor.ID}} {{json .Actor.Attributes}}")
	contains(t, "docker events", attrs, `container die `)
	contains(t, "docker events", attrs, `"exitCode":"3","image":"localhost/busybox:latest","name":"ev-exit","team":"a"}`)
	contains(t, "docker events", attrs, `container die `)
	if !regexp.MustCompile(`container die \S+ \{"execDuration":"[0-9]+","exitCode":"3"`).MatchString(attrs) {
		t.Errorf("the die event has no execDuration:\n%s", attrs)
	}
	contains(t, "docker events", attrs, `container exec_start: sh -c exit 5 `+runID)
	contains(t, "docker events", attrs, `"exitCode":"5"`)
	contains(t, "docker events", attrs, `network connect `+netID+` {"container":"`+runID+`","name":"ev-conn","type":"bridge"}`)
	contains(t, "docker events", attrs, `volume create ev-vol {"driver":"local"}`)
	if strings.Contains(attrs, "containerExitCode") || strings.Contains(attrs, "podId") {
		t.Errorf("Podman's attributes in Docker's events:\n%s", attrs)
	}
	execs := te.run("docker", "events", "--since", "5m", "--until", "0s", "--filter", "event=exec_die", "--format", "{{.Action}} {{.Actor.Attributes.exitCode}}")
	if strings.TrimSpace(execs) != "exec_die 5" {
		t.Errorf("event=exec_die: %q", execs)
	}
}

// TestDockerHealthEventsOnChange: docker events words a health change
// once, as dockerd does, where the libpod stream (Podman's) has an event
// for every check. A container checked each second turns healthy, stays so
// for several checks, then fails and turns unhealthy.
func TestDockerHealthEventsOnChange(t *testing.T) {
	te := startEngine(t)
	te.run("docker", "run", "-d", "--name", "hc", "--health-cmd", "test ! -f /tmp/bad", "--health-interval", "1s", "--health-retries", "1",
		"localhost/busybox:latest", "sh", "-c", "sleep 4; touch /tmp/bad; sleep 300")
	deadline := time.Now().Add(30 * time.Second)
	for strings.TrimSpace(te.run("docker", "inspect", "-f", "{{.State.Health.Status}}", "hc")) != "unhealthy" {
		if time.Now().After(deadline) {
			t.Fatal("hc did not turn unhealthy within 30 s")
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(2100 * time.Millisecond) // two more failed checks, and past the CLI's whole-second --until
	docker := te.run("docker", "events", "--since", "5m", "--until", "0s", "--filter", "event=health_status", "--format", "{{.Action}}")
	if got := strings.Fields(strings.ReplaceAll(docker, "health_status: ", "")); strings.Join(got, " ") != "healthy unhealthy" {
		t.Errorf("docker events: %q, want one healthy then one unhealthy", docker)
	}
	libpod := te.run("podman", "events", "--since", "5m", "--until", "0s", "--filter", "event=health_status", "--format", "{{.HealthStatus}}")
	if n := strings.Count(libpod, "healthy"); n < 5 {
		t.Errorf("podman events: %q, want an event for every check (5 and more)", libpod)
	}
}

// TestDockerStopKillEvents: a stop's signals are kill events on Docker's
// stream, as dockerd sends them (kill 15, then kill 9 when the timeout
// passes, then die and stop), and not on the libpod stream (Podman sends
// none). The image attribute is the name the create gave, as dockerd's.
func TestDockerStopKillEvents(t *testing.T) {
	te := startEngine(t)
	// PID 1 ignores SIGTERM without a handler: the stop's timeout passes.
	te.run("docker", "run", "-d", "--name", "stubborn", "localhost/busybox", "sleep", "300")
	te.run("docker", "run", "-d", "--name", "willing", "localhost/busybox:latest", "sh", "-c", "trap 'exit 0' TERM; sleep 300 & wait")
	te.run("docker", "stop", "-t", "1", "stubborn")
	te.run("docker", "stop", "willing")
	time.Sleep(1100 * time.Millisecond) // past the CLI's whole-second --until
	format := "{{.Action}} {{with .Actor.Attributes.signal}}{{.}}{{end}} {{.Actor.Attributes.image}}"
	for name, want := range map[string]string{
		"stubborn": "create  localhost/busybox|start  localhost/busybox|kill 15 localhost/busybox|kill 9 localhost/busybox|die  localhost/busybox|stop  localhost/busybox",
		"willing":  "create  localhost/busybox:latest|start  localhost/busybox:latest|kill 15 localhost/busybox:latest|die  localhost/busybox:latest|stop  localhost/busybox:latest",
	} {
		out := te.run("docker", "events", "--since", "5m", "--until", "0s", "--filter", "container="+name, "--format", format)
		if got := strings.Join(strings.Split(strings.TrimSpace(out), "\n"), "|"); got != want {
			t.Errorf("docker events of %s:\n%s\nwant\n%s", name, got, want)
		}
	}
	if libpod := te.run("podman", "events", "--since", "5m", "--until", "0s", "--filter", "event=kill", "--format", "{{.Name}}"); strings.TrimSpace(libpod) != "" {
		t.Errorf("podman events has the stops' kills: %q", libpod)
	}
}
