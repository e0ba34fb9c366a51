package dockercli

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDockerNetworkListAsDockerd: docker network ls and inspect show
// dockerd's predefined host and none networks beside bridge, and the
// filters read as dockerd reads them: type takes several values,
// predefined networks are never dangling, scope is a filter, and a bad
// filter is refused in dockerd's words (compared with dockerd 20.10).
// Before, host and none were "not found", so Compose could not use an
// external network named host.
func TestDockerNetworkListAsDockerd(t *testing.T) {
	te := startEngine(t)
	te.run("docker", "network", "create", "unused-net")
	names := func(args ...string) string {
		out := te.run("docker", append([]string{"network", "ls", "--format", "{{.Name}}/{{.Driver}}"}, args...)...)
		return strings.Join(strings.Fields(out), " ")
	}
	if got, want := names(), "bridge/bridge host/host none/null unused-net/bridge"; got != want {
		t.Errorf("network ls: %s, want %s", got, want)
	}
	if got, want := names("-f", "type=builtin"), "bridge/bridge host/host none/null"; got != want {
		t.Errorf("type=builtin: %s, want %s", got, want)
	}
	if got, want := names("-f", "type=builtin", "-f", "type=custom", "-f", "name=ne"), "none/null unused-net/bridge"; got != want {
		t.Errorf("type=builtin, type=custom, name=ne: %s, want %s", got, want)
	}
	if got, want := names("-f", "dangling=true"), "unused-net/bridge"; got != want {
		t.Errorf("dangling=true: %s, want %s", got, want)
	}
	if got, want := names("-f", "dangling=false"), "bridge/bridge host/host none/null"; got != want {
		t.Errorf("dangling=false: %s, want %s", got, want)
	}
	if got, want := names("-f", "driver=null", "-f", "scope=local"), "none/null"; got != want {
		t.Errorf("driver=null, scope=local: %s, want %s", got, want)
	}
	if got := names("-f", "scope=swarm"); got != "" {
		t.Errorf("scope=swarm: %s, want nothing", got)
	}
	contains(t, "a filter dockerd lacks", te.fails("docker", "network", "ls", "-f", "bogus=1"), "Error response from daemon: Invalid filter 'bogus'\n")
	contains(t, "a bad type", te.fails("docker", "network", "ls", "-f", "type=foo"), "Error response from daemon: invalid filter: 'type'='foo'\n")

	got := te.run("docker", "network", "inspect", "-f", "{{.Name}} {{.Driver}} {{.Scope}} {{json .IPAM}} {{json .Containers}} {{json .Labels}}", "host")
	if want := `host host local {"Driver":"default","Options":null,"Config":[]} {} {}`; strings.TrimSpace(got) != want {
		t.Errorf("inspect host: %s, want %s", got, want)
	}
	id := strings.TrimSpace(te.run("docker", "network", "inspect", "-f", "{{.Id}}", "none"))
	if got := te.run("docker", "network", "inspect", "-f", "{{.Name}}", id); strings.TrimSpace(got) != "none" {
		t.Errorf("inspect none by its ID %s: %s", id, got)
	}
	contains(t, "rm host", te.fails("docker", "network", "rm", "host"), "host is a pre-defined network and cannot be removed")
}

// TestDockerNetworkRefusalsAsDockerd: the refusals of network create, rm
// and connect carry dockerd's words, which clients and scripts match on: a
// predefined name ("operation is not permitted on predefined ... network",
// 403, "default" among them), a network containers are attached to
// ("has active endpoints", 403 where it was a 409 in Podman's words), and
// a connect to a network that does not exist ("network X not found", where
// it was Podman's "unable to find network with name or ID X").
func TestDockerNetworkRefusalsAsDockerd(t *testing.T) {
	te := startEngine(t)
	for _, name := range []string{"bridge", "host", "none", "default"} {
		contains(t, "create "+name, te.fails("docker", "network", "create", name),
			"Error response from daemon: operation is not permitted on predefined "+name+" network")
	}
	te.run("docker", "network", "create", "busy-net")
	id := strings.TrimSpace(te.run("docker", "create", "--name", "on-busy", "--network", "busy-net", "localhost/busybox", "true"))
	contains(t, "rm in use", te.fails("docker", "network", "rm", "busy-net"),
		`Error response from daemon: error while removing network: network busy-net has active endpoints (name:"on-busy" id:"`+id[:12]+`")`)
	contains(t, "connect to a missing network", te.fails("docker", "network", "connect", "no-such-net", "on-busy"),
		"Error response from daemon: network no-such-net not found\n")
	contains(t, "disconnect from a missing network", te.fails("docker", "network", "disconnect", "no-such-net", "on-busy"),
		"Error response from daemon: network no-such-net not found\n")
}

// TestDockerVolumeRemoveAsDockerd: docker volume rm -f, as dockerd's,
// answers a missing volume as removed and removes no container: a volume
// in use is refused with dockerd's words naming the container. Before, -f
// of a missing volume failed with "no such volume" and -f of a volume in
// use removed the container with it (Podman's force), so docker compose
// down -v, which always forces, removed containers of other projects.
func TestDockerVolumeRemoveAsDockerd(t *testing.T) {
	te := startEngine(t)
	if got := te.run("docker", "volume", "rm", "-f", "no-such-vol"); strings.TrimSpace(got) != "no-such-vol" {
		t.Errorf("volume rm -f of a missing volume: %s", got)
	}
	contains(t, "rm of a missing volume", te.fails("docker", "volume", "rm", "no-such-vol"), "get no-such-vol: no such volume")
	te.run("docker", "volume", "create", "held-vol")
	id := strings.TrimSpace(te.run("docker", "create", "--name", "holder", "-v", "held-vol:/data", "localhost/busybox", "true"))
	for _, args := range [][]string{{"volume", "rm", "held-vol"}, {"volume", "rm", "-f", "held-vol"}} {
		contains(t, strings.Join(args, " "), te.fails("docker", args...),
			"Error response from daemon: remove held-vol: volume is in use - ["+id+"]\n")
	}
	te.run("docker", "inspect", "holder")
	te.run("docker", "volume", "inspect", "held-vol")
}

// TestDockerUnnamedVolumeIsAnonymous: a volume docker volume create makes
// without a name is anonymous, as dockerd 23 on makes it, so docker volume
// prune (API 1.42 on: anonymous volumes only) removes it and keeps a named
// one. Before, it was kept as if named.
func TestDockerUnnamedVolumeIsAnonymous(t *testing.T) {
	te := startEngine(t)
	unnamed := strings.TrimSpace(te.run("docker", "volume", "create"))
	te.run("docker", "volume", "create", "kept-vol")
	contains(t, "volume prune", te.run("docker", "volume", "prune", "-f"), unnamed)
	if got := strings.Fields(te.run("docker", "volume", "ls", "-q")); len(got) != 1 || got[0] != "kept-vol" {
		t.Errorf("volumes after prune: %v, want [kept-vol]", got)
	}
}

// TestDockerEndpointAndSandboxIDs: a running container has dockerd's
// endpoint and sandbox identities: an EndpointID of 64 hex digits on each
// network, the same in the network's inspect, and a SandboxID beside its
// SandboxKey (the namespace file); a stopped one has neither, as dockerd
// (both were always empty).
func TestDockerEndpointAndSandboxIDs(t *testing.T) {
	te := startEngine(t)
	te.run("docker", "network", "create", "epnet")
	id := strings.TrimSpace(te.run("docker", "run", "-d", "--name", "ep", "--network", "epnet", "localhost/busybox:latest", "sleep", "300"))
	hex64 := regexp.MustCompile(`^[0-9a-f]{64}$`)
	fields := strings.Fields(te.run("docker", "inspect", "-f", `{{.NetworkSettings.Networks.epnet.EndpointID}} {{.NetworkSettings.SandboxID}} {{.NetworkSettings.SandboxKey}}`, "ep"))
	if len(fields) != 3 || !hex64.MatchString(fields[0]) || !hex64.MatchString(fields[1]) {
		t.Fatalf("EndpointID, SandboxID, SandboxKey: %q", fields)
	}
	if _, err := os.Stat(fields[2]); err != nil {
		t.Fatalf("SandboxKey: %v", err)
	}
	if got := strings.TrimSpace(te.run("docker", "network", "inspect", "-f", `{{(index .Containers "`+id+`").EndpointID}}`, "epnet")); got != fields[0] {
		t.Fatalf("the network's EndpointID %q, the container's %q", got, fields[0])
	}
	te.run("docker", "stop", "-t", "0", "ep")
	if got := te.run("docker", "inspect", "-f", `{{.NetworkSettings.Networks.epnet.EndpointID}}|{{.NetworkSettings.SandboxID}}`, "ep"); strings.TrimSpace(got) != "|" {
		t.Fatalf("a stopped container's EndpointID and SandboxID: %q, want none", got)
	}
}
