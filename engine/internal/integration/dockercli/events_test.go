package dockercli

import (
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
}
