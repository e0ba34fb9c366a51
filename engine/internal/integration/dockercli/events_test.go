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
