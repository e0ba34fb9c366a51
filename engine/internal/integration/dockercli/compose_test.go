package dockercli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-project/berth/shared/testnet"

	"strconv"
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

// composeBinary is BERTH_DOCKER_COMPOSE or the cached build; the test is
// skipped (failed under BERTH_TEST_STRICT=1) without one.
func composeBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("BERTH_DOCKER_COMPOSE"); p != "" {
		return p
	}
	cache := os.Getenv("BERTH_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "berth")
	}
	p := filepath.Join(cache, "docker-compose-"+composeVersion)
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("BERTH_TEST_STRICT") == "1" {
			t.Fatalf("Docker Compose is required (hack/docker-compose.sh builds it; BERTH_TEST_STRICT=1): %v", err)
		}
		t.Skipf("Docker Compose not built (hack/docker-compose.sh): %v", err)
	}
	return p
}

// TestComposeProject: docker compose up -d, ps, logs, exec and down -v of
// a project that builds an image and waits for a healthy service.
func TestComposeProject(t *testing.T) {
	compose := composeBinary(t)
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
	if body := httpGet(t, "http://127.0.0.1:"+port+"/index.html"); body != "web-page\n" {
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
