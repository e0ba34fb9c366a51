package dockercli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/need"
)

// TestDockerLinks: docker run --link on the default network and on a
// user-defined one writes the linked container's address under the alias
// into /etc/hosts (and on the default network dockerd's link variables
// into the environment); inspect shows the link as dockerd does; a link to a
// container that does not exist, or from one in the host's network, is
// refused and creates nothing.
func TestDockerLinks(t *testing.T) {
	te := startEngine(t)
	te.run("docker", "run", "-d", "--name", "ln-target", "--expose", "80", "-e", "GREETING=hi", "localhost/busybox:latest", "sleep", "300")
	ip := strings.TrimSpace(te.run("docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", "ln-target"))
	if ip == "" {
		t.Fatal("the linked container has no address")
	}
	hosts := te.run("docker", "run", "--rm", "--link", "ln-target:db", "localhost/busybox:latest", "grep", "-w", "db", "/etc/hosts")
	if fields := strings.Fields(hosts); len(fields) < 2 || fields[0] != ip || fields[1] != "db" || !strings.Contains(hosts, "ln-target") {
		t.Fatalf("/etc/hosts line of the link: %q, want %s db ... ln-target", hosts, ip)
	}

	// On the default network a link also sets dockerd's variables; the
	// container's own win.
	env := te.run("docker", "run", "--rm", "--name", "ln-env", "--link", "ln-target:db", "-e", "DB_PORT=mine", "localhost/busybox:latest", "env")
	for _, want := range []string{"DB_NAME=/ln-env/db", "DB_PORT_80_TCP=tcp://" + ip + ":80", "DB_PORT_80_TCP_ADDR=" + ip, "DB_PORT_80_TCP_PORT=80", "DB_PORT_80_TCP_PROTO=tcp", "DB_ENV_GREETING=hi", "DB_PORT=mine"} {
		contains(t, "link variables", env, want+"\n")
	}

	// A user-defined network: the address the two share.
	te.run("docker", "network", "create", "ln-net")
	te.run("docker", "network", "connect", "ln-net", "ln-target")
	netIP := strings.TrimSpace(te.run("docker", "inspect", "-f", `{{(index .NetworkSettings.Networks "ln-net").IPAddress}}`, "ln-target"))
	te.run("docker", "create", "--name", "ln-user", "--network", "ln-net", "--link", "ln-target", "localhost/busybox:latest", "sleep", "300")
	contains(t, "inspect HostConfig.Links", te.run("docker", "inspect", "-f", "{{json .HostConfig.Links}}", "ln-user"), `["/ln-target:/ln-user/ln-target"]`)
	te.run("docker", "start", "ln-user")
	contains(t, "hosts on the shared network", te.run("docker", "exec", "ln-user", "grep", "-w", "ln-target", "/etc/hosts"), netIP+"\tln-target")
	if env := te.run("docker", "exec", "ln-user", "env"); strings.Contains(env, "LN_TARGET_NAME=") {
		t.Fatalf("a link on a user-defined network set dockerd's default-bridge variables:\n%s", env)
	}

	// The linked container starts again with another address (a newcomer
	// took its old one): the running linker's /etc/hosts follows.
	te.run("docker", "stop", "-t", "0", "ln-target")
	te.run("docker", "run", "-d", "--name", "ln-newcomer", "--network", "ln-net", "localhost/busybox:latest", "sleep", "300")
	te.run("docker", "start", "ln-target")
	movedIP := strings.TrimSpace(te.run("docker", "inspect", "-f", `{{(index .NetworkSettings.Networks "ln-net").IPAddress}}`, "ln-target"))
	if movedIP == netIP {
		t.Fatalf("ln-target kept %s after the newcomer came", netIP)
	}
	contains(t, "hosts after the linked container moved", te.run("docker", "exec", "ln-user", "grep", "-w", "ln-target", "/etc/hosts"), movedIP+"\tln-target")

	contains(t, "link to nothing", te.fails("docker", "run", "--rm", "--link", "ln-nosuch:db", "localhost/busybox:latest", "true"), "ln-nosuch")
	contains(t, "link in host mode", te.fails("docker", "run", "--rm", "--network", "host", "--link", "ln-target", "localhost/busybox:latest", "true"), "HostConfig.Links")
	if out := te.run("docker", "ps", "-aq"); len(strings.Fields(out)) != 3 {
		t.Fatalf("refused links left containers: %q", out)
	}
}

// composeV1File is a Compose file as Compose v1 projects write them: a
// version, links and a named volume.
const composeV1File = `version: "3.8"
services:
  web:
    image: localhost/busybox:latest
    command: ["sh", "-c", "echo v1-page > /www/index.html; exec httpd -f -p 80 -h /www"]
    volumes: [data:/www]
    networks: [front]
    stop_grace_period: 1s
  app:
    image: localhost/busybox:latest
    command: ["sleep", "300"]
    links: ["web:site"]
    depends_on: [web]
    networks: [front]
    stop_grace_period: 1s
volumes:
  data: {}
networks:
  front: {}
`

// TestComposeV1Project: Debian's docker-compose (Compose v1, 1.29) brings
// a project up (it makes every network Attachable and links its services),
// runs a one-off container (linked to its service's running one), keeps
// the containers of a second up, and takes it all down.
func TestComposeV1Project(t *testing.T) {
	need.All(t, "Compose v1 (Debian's docker-compose; hack/deps.sh test installs it)", "/usr/bin/docker-compose")
	te := startEngine(t)
	project := filepath.Join(te.Dir, "v1project")
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, "docker-compose.yml"), []byte(composeV1File), 0o644); err != nil {
		t.Fatal(err)
	}
	dc := func(args ...string) string {
		t.Helper()
		return te.run("docker-compose", append([]string{"--project-directory", project, "-f", filepath.Join(project, "docker-compose.yml"), "-p", "bv1"}, args...)...)
	}
	dc("up", "-d")
	contains(t, "network inspect", te.run("docker", "network", "inspect", "-f", "{{.Attachable}} {{.Options}}", "bv1_front"), "true map[]")
	webIP := strings.TrimSpace(te.run("docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", "bv1_web_1"))
	contains(t, "the link's alias", te.run("docker", "exec", "bv1_app_1", "grep", "-w", "site", "/etc/hosts"), webIP+"\tsite")
	contains(t, "through the link", te.run("docker", "exec", "bv1_app_1", "wget", "-qO-", "http://site/index.html"), "v1-page")

	before := te.run("docker", "ps", "-q", "--no-trunc")
	dc("up", "-d")
	if after := te.run("docker", "ps", "-q", "--no-trunc"); after != before {
		t.Fatalf("a second up replaced containers:\nbefore %s\nafter %s", before, after)
	}
	contains(t, "one-off run", dc("run", "--rm", "app", "sh", "-c", "echo one-off; grep -c bv1_app_1 /etc/hosts"), "one-off")

	dc("down", "-v", "-t", "1")
	if out := te.run("docker", "ps", "-aq"); strings.TrimSpace(out) != "" {
		t.Fatalf("compose down left containers: %q", out)
	}
	if out := te.run("docker", "network", "ls", "--format", "{{.Name}}"); strings.Contains(out, "bv1_") {
		t.Fatalf("compose down left networks: %q", out)
	}
}

// TestDockerStateSurvivesKill9: what the Docker front door keeps (a
// container's links, a network's Docker options and Attachable) is in the
// records an engine killed with SIGKILL finds again.
func TestDockerStateSurvivesKill9(t *testing.T) {
	p := enginetest.StartProcess(t, enginetest.Options{What: "the Docker state kill -9 test", Bridged: true, NoImage: true, Needs: []string{"docker"}})
	te := dockerClient(t, p.Engine)
	te.run("docker", "network", "create", "--attachable", "-o", "com.docker.network.driver.mtu=1400", "k-net")
	te.run("docker", "run", "-d", "--name", "k-target", "--network", "k-net", "localhost/busybox:latest", "sleep", "300")
	te.run("docker", "create", "--name", "k-link", "--network", "k-net", "--link", "k-target:db", "localhost/busybox:latest", "sleep", "300")

	p.Kill9()
	p.Start()

	contains(t, "links after the kill", te.run("docker", "inspect", "-f", "{{json .HostConfig.Links}}", "k-link"), `["/k-target:/k-link/db"]`)
	te.run("docker", "start", "k-link")
	contains(t, "hosts after the kill", te.run("docker", "exec", "k-link", "grep", "-w", "db", "/etc/hosts"), "k-target")
	contains(t, "network after the kill", te.run("docker", "network", "inspect", "-f", "{{.Attachable}} {{.Options}}", "k-net"), "true map[com.docker.network.driver.mtu:1400]")
}
