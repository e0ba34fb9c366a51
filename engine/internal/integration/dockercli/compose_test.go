package dockercli

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/need"
	"github.com/berth-project/berth/engine/internal/testsupport/poll"
	"github.com/berth-project/berth/shared/testnet"
)

// composeVersion is the Compose hack/docker-compose.sh builds and caches.
const composeVersion = "v2.40.3"

// composeFile is a project with a build, a healthcheck another service
// waits for, a named volume, two networks, a published port, an env file
// and a profile left out.
const composeFile = `services:
  db:
    image: localhost/busybox:latest
    command: ["sh", "-c", "echo db-up; echo $$DB_NAME > /data/name; exec sleep 300"]
    env_file: [db.env]
    volumes: [dbdata:/data]
    networks: [back]
    stop_grace_period: 1s
    healthcheck:
      test: ["CMD-SHELL", "[ -f /data/name ]"]
      interval: 1s
      retries: 20
  web:
    build:
      context: .
      dockerfile: Dockerfile.web
    ports: ["127.0.0.1:%s:80"]
    depends_on:
      db:
        condition: service_healthy
    networks: [front, back]
    environment:
      GREETING: hello
    stop_grace_period: 1s
  debug:
    image: localhost/busybox:latest
    command: ["sleep", "300"]
    profiles: [debug]
volumes:
  dbdata: {}
networks:
  front: {}
  back: {}
`

const webDockerfile = `FROM localhost/busybox:latest
RUN mkdir /www && echo web-page > /www/index.html
CMD ["sh", "-c", "echo web-up $GREETING; exec busybox httpd -f -p 80 -h /www"]
`

// TestComposeProject: docker compose up -d, ps, logs, exec, a second up
// that keeps the containers, and down -v of a project that builds an image
// and waits for a healthy service.
func TestComposeProject(t *testing.T) {
	port := strconv.Itoa(testnet.FreePort(t))
	te, dc := composeProject(t, "bt", map[string]string{
		"compose.yaml":   fmt.Sprintf(composeFile, port),
		"db.env":         "DB_NAME=appdb\n",
		"Dockerfile.web": webDockerfile,
	})
	dc("up", "-d")
	ps := dc("ps", "--format", "{{.Service}} {{.Status}}")
	contains(t, "compose ps", ps, "db Up")
	contains(t, "compose ps", ps, "(healthy)")
	contains(t, "compose ps", ps, "web Up")
	if strings.Contains(ps, "debug") {
		t.Fatalf("the debug profile's service runs: %s", ps)
	}
	if body := poll.GetWithin(t, 10*time.Second, "http://127.0.0.1:"+port+"/index.html"); body != "web-page\n" {
		t.Fatalf("the published port answered %q", body)
	}
	logs := dc("logs")
	contains(t, "compose logs", logs, "db-up")
	contains(t, "compose logs", logs, "web-up hello")
	contains(t, "compose exec", dc("exec", "-T", "db", "cat", "/data/name"), "appdb")
	contains(t, "compose exec", dc("exec", "-T", "web", "sh", "-c", "echo $GREETING"), "hello")
	contains(t, "docker network ls", te.run("docker", "network", "ls", "--format", "{{.Name}}"), "bt_back")

	// A second up keeps the running containers: Compose compares each
	// one's networks (by ID) and volumes (by name) in docker ps with the
	// project's, and recreates a container that lacks one.
	before := te.run("docker", "ps", "-q", "--no-trunc")
	dc("up", "-d")
	if after := te.run("docker", "ps", "-q", "--no-trunc"); after != before {
		t.Fatalf("a second compose up replaced containers:\nbefore %s\nafter %s", before, after)
	}

	dc("down", "-v")
	if out := te.run("docker", "ps", "-aq"); strings.TrimSpace(out) != "" {
		t.Fatalf("compose down left containers: %q", out)
	}
	if out := te.run("docker", "volume", "ls", "-q"); strings.Contains(out, "bt_dbdata") {
		t.Fatalf("compose down -v left the volume: %q", out)
	}
	if out := te.run("docker", "network", "ls", "--format", "{{.Name}}"); strings.Contains(out, "bt_") {
		t.Fatalf("compose down left networks: %q", out)
	}
}

// composeProject starts an engine with Compose as the docker CLI's plugin,
// writes files into a project directory and returns a runner of docker
// compose commands on it (project name name).
func composeProject(t *testing.T, name string, files map[string]string) (*testEngine, func(args ...string) string) {
	t.Helper()
	compose := need.Cached(t, "BERTH_DOCKER_COMPOSE", "docker-compose-"+composeVersion, "hack/docker-compose.sh")
	te := startEngine(t)
	plugins := filepath.Join(te.Dir, "docker-config", "cli-plugins")
	if err := os.MkdirAll(plugins, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(compose, filepath.Join(plugins, "docker-compose")); err != nil {
		t.Fatal(err)
	}
	te.env = append(te.env, "COMPOSE_BAKE=false")
	project := filepath.Join(te.Dir, "project")
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	for file, content := range files {
		if err := os.WriteFile(filepath.Join(project, file), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return te, func(args ...string) string {
		t.Helper()
		return te.run("docker", append([]string{"compose", "--project-directory", project, "-p", name}, args...)...)
	}
}

// runtimeComposeFile uses the run-time keys Compose files often carry.
const runtimeComposeFile = `services:
  app:
    image: localhost/busybox:latest
    command: ["sh", "-c", "cat /run/secrets/token; cat /etc/cfg.txt; ulimit -n; grep db.local /etc/hosts; echo $$GREETING; touch /ro 2>/dev/null || echo read-only; exec sleep 300"]
    init: true
    ipc: host
    stop_grace_period: 1s
    logging:
      driver: json-file
      options: {max-size: "10m", max-file: "3"}
    ulimits:
      nofile: {soft: 1024, hard: 2048}
    sysctls:
      net.ipv4.ip_unprivileged_port_start: "0"
    extra_hosts: ["db.local:10.1.2.3"]
    environment: {GREETING: hello}
    secrets: [token]
    configs:
      - source: cfg
        target: /etc/cfg.txt
    read_only: true
    tmpfs: [/tmp]
    deploy:
      resources:
        limits: {memory: 64m, cpus: "0.5"}
    healthcheck:
      test: ["CMD", "true"]
      interval: 1s
secrets:
  token: {file: ./secret.txt}
configs:
  cfg: {file: ./cfg.txt}
`

// TestComposeRuntimeOptions: docker compose up of a service with file
// secrets and configs, ulimits, sysctls, extra hosts, init, the host's IPC
// namespace, json-file log options, a read-only root with a tmpfs, memory
// and CPU limits and a healthcheck: each takes effect inside the container
// and shows in inspect; down removes it.
func TestComposeRuntimeOptions(t *testing.T) {
	te, dc := composeProject(t, "rt", map[string]string{
		"compose.yaml": runtimeComposeFile,
		"secret.txt":   "s3cret\n",
		"cfg.txt":      "config-content\n",
	})
	dc("up", "-d")
	var logs string
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(logs, "read-only") {
		if time.Now().After(deadline) {
			t.Fatalf("compose logs:\n%s", logs)
		}
		time.Sleep(200 * time.Millisecond)
		logs = dc("logs", "app")
	}
	for _, want := range []string{"s3cret", "config-content", "1024", "10.1.2.3", "hello", "read-only"} {
		contains(t, "compose logs", logs, want)
	}
	got := strings.TrimSpace(te.run("docker", "inspect", "--format",
		`{{.HostConfig.IpcMode}} {{.HostConfig.Memory}} {{.HostConfig.NanoCpus}} {{index .HostConfig.LogConfig.Config "max-size"}} {{.HostConfig.ReadonlyRootfs}} {{.HostConfig.Init}}`, "rt-app-1"))
	if want := "host 67108864 500000000 10485760 true true"; got != want {
		t.Fatalf("inspect: %q, want %q", got, want)
	}
	hostIPC, _ := os.Readlink("/proc/self/ns/ipc")
	contains(t, "the container's IPC namespace (ipc: host)", dc("exec", "app", "sh", "-c", "readlink /proc/self/ns/ipc"), hostIPC)
	dc("down")
	if left := strings.TrimSpace(dc("ps", "-a", "-q")); left != "" {
		t.Fatalf("compose down left %s", left)
	}
}

// TestComposeIPCService: a service with ipc: service:NAME joins the IPC
// namespace and /dev/shm of that service's shareable container (Compose
// sends container:ID).
func TestComposeIPCService(t *testing.T) {
	te, dc := composeProject(t, "ipcsvc", map[string]string{"compose.yaml": `services:
  donor:
    image: localhost/busybox:latest
    ipc: shareable
    command: sh -c 'echo composed > /dev/shm/seg; exec sleep 600'
  joiner:
    image: localhost/busybox:latest
    ipc: "service:donor"
    depends_on: [donor]
    command: sh -c 'for i in $$(seq 50); do test -f /dev/shm/seg && break; sleep 0.1; done; cat /dev/shm/seg; exec sleep 600'
`})
	dc("up", "-d")
	deadline := time.Now().Add(20 * time.Second)
	for logs := ""; !strings.Contains(logs, "composed"); logs = dc("logs", "joiner") {
		if time.Now().After(deadline) {
			t.Fatalf("joiner's logs: %q", logs)
		}
		time.Sleep(200 * time.Millisecond)
	}
	donorID := strings.TrimSpace(te.run("docker", "inspect", "--format", "{{.Id}}", "ipcsvc-donor-1"))
	if got := strings.TrimSpace(te.run("docker", "inspect", "--format", "{{.HostConfig.IpcMode}}", "ipcsvc-joiner-1")); got != "container:"+donorID {
		t.Errorf("joiner's IpcMode %q, want container:%s", got, donorID)
	}
	dc("down", "-t", "0")
}

// TestComposeServiceNamespaces: a service that runs after another one
// completed (condition: service_completed_successfully), with a domain
// name and a host-gateway entry, and a side service in its PID and network
// namespaces (pid and network_mode service:NAME): the side service sees
// the app's process as its PID 1 and the app's /etc/hosts.
func TestComposeServiceNamespaces(t *testing.T) {
	te, dc := composeProject(t, "nsp", map[string]string{"compose.yaml": `services:
  init:
    image: localhost/busybox:latest
    command: ["true"]
  app:
    image: localhost/busybox:latest
    command: sh -c 'hostname -f; exec sleep 600'
    hostname: app
    domainname: example.org
    extra_hosts: ["gw:host-gateway"]
    depends_on:
      init: {condition: service_completed_successfully}
  side:
    image: localhost/busybox:latest
    command: sh -c 'cat /proc/1/comm; grep -c gw /etc/hosts; exec sleep 600'
    pid: "service:app"
    network_mode: "service:app"
    depends_on: [app]
`})
	dc("up", "-d")
	deadline := time.Now().Add(20 * time.Second)
	for app, side := "", ""; !strings.Contains(app, "app.example.org") || !strings.Contains(side, "sleep\n1"); app, side = dc("logs", "--no-log-prefix", "app"), dc("logs", "--no-log-prefix", "side") {
		if time.Now().After(deadline) {
			t.Fatalf("app's logs %q, side's %q", app, side)
		}
		time.Sleep(200 * time.Millisecond)
	}
	appID := strings.TrimSpace(te.run("docker", "inspect", "--format", "{{.Id}}", "nsp-app-1"))
	if got := strings.TrimSpace(te.run("docker", "inspect", "--format", "{{.HostConfig.PidMode}}", "nsp-side-1")); got != "container:"+appID {
		t.Errorf("side's PidMode %q", got)
	}
	dc("down", "-t", "0")
}
