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

// TestComposeProject: docker compose up -d, ps, logs, exec and down -v of
// a project that builds an image and waits for a healthy service.
func TestComposeProject(t *testing.T) {
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
	port := strconv.Itoa(testnet.FreePort(t))
	project := filepath.Join(te.Dir, "project")
	for name, content := range map[string]string{
		"compose.yaml":   fmt.Sprintf(composeFile, port),
		"db.env":         "DB_NAME=appdb\n",
		"Dockerfile.web": webDockerfile,
	} {
		if err := os.MkdirAll(project, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(project, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dc := func(args ...string) string {
		t.Helper()
		return te.run("docker", append([]string{"compose", "--project-directory", project, "-p", "bt"}, args...)...)
	}
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
