package dockercli

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/poll"
	"github.com/berth-project/berth/shared/testnet"
)

// TestDockerRunLoop: the docker CLI's everyday loop against the engine —
// run -d with a published port, ps, inspect (the name with its leading
// slash), exec, logs, cp both ways, pause, stop, start, rm, run --rm with
// an exit code, volumes and a user network.
func TestDockerRunLoop(t *testing.T) {
	te := startEngine(t)

	contains(t, "docker version", te.run("docker", "version", "--format", "{{.Server.APIVersion}}"), "1.44")
	contains(t, "docker info", te.run("docker", "info", "--format", "{{.OSType}} {{.Driver}}"), "linux")
	contains(t, "docker images", te.run("docker", "images", "--format", "{{.Repository}}:{{.Tag}}"), "localhost/busybox:latest")

	port := strconv.Itoa(testnet.FreePort(t))
	id := strings.TrimSpace(te.run("docker", "run", "-d", "--name", "web", "-p", "127.0.0.1:"+port+":80", "-e", "GREETING=hi",
		"--label", "app=web", "localhost/busybox", "sh", "-c", "echo started; echo oops >&2; echo hello > /index.html; exec httpd -f -p 80 -h /"))
	if len(id) != 64 {
		t.Fatalf("docker run -d printed %q, want a container ID", id)
	}
	contains(t, "docker ps", te.run("docker", "ps", "--filter", "label=app=web", "--format", "{{.Names}} {{.Ports}}"), "web 127.0.0.1:"+port+"->80/tcp")
	var inspected []struct {
		Name   string
		Config struct{ Env []string }
		State  struct{ Status string }
	}
	if err := json.Unmarshal([]byte(te.run("docker", "inspect", "web")), &inspected); err != nil || len(inspected) != 1 {
		t.Fatalf("docker inspect: %v %+v", err, inspected)
	}
	if inspected[0].Name != "/web" || inspected[0].State.Status != "running" || !strings.Contains(strings.Join(inspected[0].Config.Env, " "), "GREETING=hi") {
		t.Fatalf("docker inspect: %+v", inspected[0])
	}
	body := poll.GetWithin(t, 10*time.Second, "http://127.0.0.1:"+port+"/index.html")
	if body != "hello\n" {
		t.Fatalf("the published port answered %q", body)
	}
	contains(t, "docker exec", te.run("docker", "exec", "web", "sh", "-c", "echo $GREETING"), "hi")
	if _, _, err := te.exec(nil, "docker", "exec", "web", "sh", "-c", "exit 3"); err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("docker exec exit 3: %v", err)
	}
	_, errOut, err := te.exec(nil, "docker", "logs", "web")
	if err != nil || !strings.Contains(errOut, "oops") {
		t.Fatalf("docker logs: stderr %q, %v", errOut, err)
	}
	contains(t, "docker logs", te.run("docker", "logs", "web"), "started")

	src := filepath.Join(te.Dir, "in.txt")
	if err := os.WriteFile(src, []byte("copied in\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	te.run("docker", "cp", src, "web:/in.txt")
	contains(t, "cp in", te.run("docker", "exec", "web", "cat", "/in.txt"), "copied in")
	te.run("docker", "cp", "web:/index.html", filepath.Join(te.Dir, "out.html"))
	if got, _ := os.ReadFile(filepath.Join(te.Dir, "out.html")); string(got) != "hello\n" {
		t.Fatalf("docker cp out: %q", got)
	}

	te.run("docker", "pause", "web")
	contains(t, "paused", te.run("docker", "ps", "--format", "{{.Status}}"), "(Paused)")
	te.run("docker", "unpause", "web")
	te.run("docker", "stop", "-t", "1", "web")
	contains(t, "stopped", te.run("docker", "ps", "-a", "--filter", "status=exited", "--format", "{{.Names}}"), "web")
	te.run("docker", "start", "web")
	contains(t, "restarted", te.run("docker", "inspect", "-f", "{{.State.Running}}", "web"), "true")
	errOut = te.fails("docker", "rm", "web")
	contains(t, "rm of a running container", errOut, "Stop the container before attempting removal")
	te.run("docker", "rm", "-f", "web")

	// run --rm: the exit code comes back and the container is gone.
	if _, _, err := te.exec(nil, "docker", "run", "--rm", "--name", "once", "localhost/busybox", "sh", "-c", "exit 7"); err == nil || !strings.Contains(err.Error(), "exit status 7") {
		t.Fatalf("docker run --rm exit 7: %v", err)
	}
	if out := te.run("docker", "ps", "-a", "-q", "--filter", "name=once"); strings.TrimSpace(out) != "" {
		t.Fatalf("docker run --rm left %q", out)
	}

	// A named volume and a user network, shared by two containers.
	te.run("docker", "volume", "create", "data")
	te.run("docker", "network", "create", "appnet")
	contains(t, "network ls", te.run("docker", "network", "ls", "--format", "{{.Name}}"), "bridge")
	te.run("docker", "run", "-d", "--name", "server", "--network", "appnet", "-v", "data:/data", "localhost/busybox",
		"sh", "-c", "echo shared > /data/f; exec httpd -f -p 8080 -h /data")
	out := te.run("docker", "run", "--rm", "--network", "appnet", "-v", "data:/data:ro", "localhost/busybox",
		"sh", "-c", "cat /data/f; wget -q -O - http://server:8080/f")
	if strings.Count(out, "shared") != 2 {
		t.Fatalf("volume and network shared: %q", out)
	}
	contains(t, "network inspect", te.run("docker", "network", "inspect", "appnet", "--format", "{{range .Containers}}{{.Name}} {{end}}"), "server")
	te.run("docker", "rm", "-f", "server")
	te.run("docker", "network", "rm", "appnet")
	te.run("docker", "volume", "rm", "data")
	if out := te.run("docker", "volume", "ls", "-q"); strings.Contains(out, "data") {
		t.Fatalf("volume left: %q", out)
	}
}

// TestDockerAndPodmanShareObjects: one engine, two front doors — what the
// docker CLI makes, podman --remote sees, and the other way round.
func TestDockerAndPodmanShareObjects(t *testing.T) {
	enginetest.RequirePodman(t)
	te := startEngine(t)
	te.run("docker", "run", "-d", "--name", "from-docker", "localhost/busybox", "sleep", "60")
	contains(t, "podman ps", te.run("podman", "ps", "--format", "{{.Names}}"), "from-docker")
	te.run("podman", "run", "-d", "--name", "from-podman", "localhost/busybox", "sleep", "60")
	contains(t, "docker ps", te.run("docker", "ps", "--format", "{{.Names}}"), "from-podman")
	te.run("podman", "network", "create", "pnet")
	contains(t, "docker network ls", te.run("docker", "network", "ls", "--format", "{{.Name}}"), "pnet")
	te.run("docker", "volume", "create", "dvol")
	contains(t, "podman volume ls", te.run("podman", "volume", "ls", "--format", "{{.Name}}"), "dvol")
	te.run("podman", "stop", "-t", "0", "from-docker")
	contains(t, "docker sees podman's stop", te.run("docker", "ps", "-a", "--filter", "name=from-docker", "--format", "{{.State}}"), "exited")
}

// TestDockerAPIRules: versions, Docker's error body, refused options and
// the swarm routes, over plain HTTP.
func TestDockerAPIRules(t *testing.T) {
	te := startEngine(t)
	base := "http://" + te.Addr
	for _, tt := range []struct {
		method, path, body string
		status             int
		message            string
	}{
		{"GET", "/v1.12/version", "", 400, "client version 1.12 is too old. Minimum supported API version is 1.24"},
		{"GET", "/v1.99/version", "", 400, "client version 1.99 is too new. Maximum supported API version is 1.44"},
		{"GET", "/v1.24/containers/nosuch/json", "", 404, "No such container: nosuch"},
		{"GET", "/v1.44/images/nosuch/json", "", 404, "No such image: nosuch"},
		{"GET", "/v1.44/volumes/nosuch", "", 404, "get nosuch: no such volume"},
		{"GET", "/swarm", "", 503, "swarm"},
		{"GET", "/v1.44/services", "", 503, "swarm"},
		{"POST", "/v1.44/containers/create", `{"Image":"localhost/busybox","HostConfig":{"Links":["nosuch:b"]}}`, 400, `links: container "nosuch"`},
		{"POST", "/v1.44/containers/create", `{"Image":"localhost/busybox","HostConfig":{"Links":["a:b:c"]}}`, 400, "HostConfig.Links"},
		{"POST", "/v1.44/containers/create", `{"Image":"localhost/busybox","HostConfig":{"NetworkMode":"host","Links":["a"]}}`, 400, "HostConfig.Links"},
		{"POST", "/v1.44/networks/create", `{"Name":"n-ingress","Ingress":true}`, 400, "Ingress"},
		{"POST", "/v1.44/auth", `{"username":"u","identitytoken":"t","serveraddress":"127.0.0.1:1"}`, 400, "identitytoken"},
		{"POST", "/v1.44/auth", `{"username":`, 400, "body"},
		{"POST", "/v1.44/networks/create", `{"Name":"n-config","ConfigOnly":true}`, 400, "ConfigOnly"},
		{"POST", "/v1.44/containers/create", `{"Image":"localhost/busybox","HostConfig":{"UTSMode":"container:x"}}`, 400, "HostConfig.UTSMode"},
		{"POST", "/v1.44/containers/create", `{"Image":"localhost/busybox","HostConfig":{"IpcMode":"container:x"}}`, 400, "HostConfig.IpcMode"},
		{"POST", "/v1.44/containers/create", `{"Image":"localhost/busybox","HostConfig":{"LogConfig":{"Type":"json-file","Config":{"compress":"true"}}}}`, 400, "compress"},
		{"POST", "/v1.44/containers/create", `{"Image":"localhost/busybox","HostConfig":{"LogConfig":{"Type":"syslog"}}}`, 400, "HostConfig.LogConfig.Type"},
		{"POST", "/v1.44/containers/create", `{"Image":"localhost/busybox","HostConfig":{"RestartPolicy":{"Name":"sometimes"}}}`, 400, "invalid restart policy"},
		{"POST", "/v1.44/containers/create", `{"Image":"nosuch/image"}`, 404, "No such image: nosuch/image"},
		{"POST", "/v1.44/containers/create", `{"Image":`, 400, "body"},
		{"POST", "/v1.44/networks/create", `{"Name":"bridge"}`, 403, "operation is not permitted on predefined bridge network"},
		{"POST", "/v1.44/containers/nosuch/start?checkpoint=cp1", "", 400, "starting from a checkpoint is not supported"},
		{"POST", "/v1.44/build?cpushares=512", "", 400, "cpushares"},
		{"POST", "/v1.44/containers/create", `{"Image":"localhost/busybox","NetworkingConfig":{"EndpointsConfig":{"bridge":{"IPAMConfig":{"LinkLocalIPs":["169.254.1.1"]}}}}}`, 400, "LinkLocalIPs"},
		{"POST", "/v1.44/build?securityopt=seccomp=unconfined", "", 400, "securityopt"},
	} {
		status, _, data := te.Exchange(tt.method, base+tt.path, "application/json", strings.NewReader(tt.body))
		var msg struct{ Message string }
		if status != tt.status || json.Unmarshal(data, &msg) != nil || !strings.Contains(msg.Message, tt.message) {
			t.Errorf("%s %s: %d %s, want %d with a message containing %q", tt.method, tt.path, status, data, tt.status, tt.message)
		}
	}
	for _, path := range []string{"/_ping", "/v1.24/_ping", "/v1.44/_ping"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// The docker CLI reads the server's OS here (--device needs it).
		if resp.StatusCode != 200 || resp.Header.Get("Api-Version") != "1.44" || resp.Header.Get("Ostype") != "linux" {
			t.Errorf("GET %s: %d Api-Version %q Ostype %q", path, resp.StatusCode, resp.Header.Get("Api-Version"), resp.Header.Get("Ostype"))
		}
	}
	// Nothing half-created by the refused requests.
	if out := te.run("docker", "ps", "-a", "-q"); strings.TrimSpace(out) != "" {
		t.Fatalf("refused creates left containers: %q", out)
	}
}
