package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/go-connections/nat"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"
)

const (
	enginePort  = "8080/tcp"
	uploadsPort = "8081/tcp"
	enginePing  = "/v4.0.0/libpod/_ping"
	// engineAlias is the engine's name on the stack's private network.
	engineAlias = "engine"
)

// images returns the service images: BERTH_E2E_*_IMAGE or the tags
// hack/images.sh (`make images`) builds.
func images() (engine, uploads string) {
	engine, uploads = os.Getenv("BERTH_E2E_ENGINE_IMAGE"), os.Getenv("BERTH_E2E_UPLOADS_IMAGE")
	if engine == "" {
		engine = "localhost/berth-engine:latest"
	}
	if uploads == "" {
		uploads = "localhost/berth-uploads:latest"
	}
	return engine, uploads
}

func TestMain(m *testing.M) {
	// The reaper image cannot be pulled here, and wait strategies must dial
	// loopback (../shared/ENVIRONMENT.md); hack/test.sh exports both too.
	for key, value := range map[string]string{
		"TESTCONTAINERS_RYUK_DISABLED": "true",
		"TESTCONTAINERS_HOST_OVERRIDE": "127.0.0.1",
	} {
		if os.Getenv(key) == "" {
			os.Setenv(key, value)
		}
	}
	if reason := missingPrerequisite(); reason != "" {
		if os.Getenv("BERTH_TEST_STRICT") == "1" {
			fmt.Fprintf(os.Stderr, "e2e: %s (BERTH_TEST_STRICT=1)\n", reason)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "e2e: skipped: %s (make e2e starts dockerd and builds the images)\n", reason)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// missingPrerequisite names what the e2e tests cannot run without, or "".
func missingPrerequisite() string {
	if _, err := exec.LookPath("docker"); err != nil {
		return "docker CLI not found"
	}
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		return "dockerd does not answer: " + strings.TrimSpace(string(out))
	}
	engine, uploads := images()
	for _, image := range []string{engine, uploads} {
		if err := exec.Command("docker", "image", "inspect", image).Run(); err != nil {
			return "image " + image + " not found"
		}
	}
	return ""
}

// stack is one engine and one uploads container on a private network.
type stack struct {
	t *testing.T
	// engineToken is the bearer token the engine accepts (its --tokens-file) and
	// the uploads service presents (its --engine-token-file).
	engineToken string
	engine      testcontainers.Container
	uploads     testcontainers.Container
}

func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// startStack starts the engine, then uploads pointed at it by its network
// alias. Containers, network and the engine's volume go when the test ends.
func startStack(t *testing.T, ctx context.Context) *stack {
	t.Helper()
	engineImage, uploadsImage := images()
	suffix := randomSuffix()

	net, err := network.New(ctx)
	testcontainers.CleanupNetwork(t, net)
	if err != nil {
		t.Fatalf("creating network: %v", err)
	}

	// The engine needs every capability the host grants (but SYS_RESOURCE,
	// which this host's bounding set lacks), no seccomp/AppArmor confinement,
	// the host's cgroups, and its root on a volume (overlay cannot stack on
	// the container's own overlay root).
	volume := "berth-e2e-engine-" + suffix
	// The engine listens on 0.0.0.0 inside its container, which it refuses
	// without client authentication: the stack runs with a bearer token, as
	// deploy/compose.yaml does.
	token := randomSuffix() + randomSuffix() + randomSuffix() + randomSuffix()
	tokenFile := func(path string) testcontainers.ContainerFile {
		return testcontainers.ContainerFile{Reader: strings.NewReader(token + "\n"), ContainerFilePath: path, FileMode: 0o444}
	}
	engine := startContainer(t, ctx, "engine", testcontainers.ContainerRequest{
		Name:           "berth-e2e-engine-" + suffix,
		Image:          engineImage,
		ExposedPorts:   []string{enginePort},
		Networks:       []string{net.Name},
		NetworkAliases: map[string][]string{net.Name: {engineAlias}},
		Env:            map[string]string{"BERTH_ENGINE_TOKENS_FILE": "/run/berth/tokens"},
		Files:          []testcontainers.ContainerFile{tokenFile("/run/berth/tokens")},
		Mounts:         testcontainers.ContainerMounts{testcontainers.VolumeMount(volume, "/var/lib/berth")},
		HostConfigModifier: func(hc *container.HostConfig) {
			hc.CapAdd = []string{"ALL"}
			hc.CapDrop = []string{"SYS_RESOURCE"}
			hc.SecurityOpt = []string{"seccomp=unconfined", "apparmor=unconfined"}
			hc.CgroupnsMode = container.CgroupnsModeHost
			hc.Binds = append(hc.Binds, "/sys/fs/cgroup:/sys/fs/cgroup:rw")
		},
		WaitingFor: wait.ForHTTP(enginePing).WithPort(enginePort).
			WithHeaders(map[string]string{"Authorization": "Bearer " + token}).WithStartupTimeout(60 * time.Second),
	}, testcontainers.RemoveVolumes(volume))

	uploads := startContainer(t, ctx, "uploads", testcontainers.ContainerRequest{
		Name:         "berth-e2e-uploads-" + suffix,
		Image:        uploadsImage,
		ExposedPorts: []string{uploadsPort},
		Networks:     []string{net.Name},
		Env: map[string]string{
			"BERTH_UPLOADS_ENGINE_URL":        "tcp://" + engineAlias + ":8080",
			"BERTH_UPLOADS_POLL_INTERVAL":     "250ms",
			"BERTH_UPLOADS_ENGINE_TOKEN_FILE": "/run/berth/engine-token",
		},
		Files:      []testcontainers.ContainerFile{tokenFile("/run/berth/engine-token")},
		WaitingFor: wait.ForHTTP("/readyz").WithPort(uploadsPort).WithStartupTimeout(60 * time.Second),
	})
	s := &stack{t: t, engineToken: token, engine: engine, uploads: uploads}
	if status, body := call(t, http.MethodGet, s.engineURL()+enginePing, "", nil); status != http.StatusUnauthorized {
		t.Fatalf("engine API without a token: %d %s, want 401", status, body)
	}
	t.Cleanup(func() {
		if t.Failed() {
			s.dumpLogs()
		}
	})
	// Runs before the engine's container is removed (cleanups run last
	// first): what the test deployed goes through the API, as a user would
	// remove it. The engine shares the host's cgroups, so a container
	// stopped only by the engine's own container going away would leave
	// its cgroups on the host.
	t.Cleanup(s.removeWorkloads)
	return s
}

// startContainer starts req's container, the stack's what, and removes it
// (as cleanup adds) when the test ends.
func startContainer(t *testing.T, ctx context.Context, what string, req testcontainers.ContainerRequest, cleanup ...testcontainers.TerminateOption) testcontainers.Container {
	t.Helper()
	c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{ContainerRequest: req, Started: true})
	testcontainers.CleanupContainer(t, c, cleanup...)
	if err != nil {
		t.Fatalf("starting %s container: %v", what, err)
	}
	return c
}

// removeWorkloads removes the engine's quadlets, pods and containers, and
// checks that no cgroup of those containers is left on the host.
func (s *stack) removeWorkloads() {
	t := s.t
	var ctrs []struct {
		ID string `json:"Id"`
	}
	if status, body := s.callEngine(http.MethodGet, "/v4.0.0/libpod/containers/json?all=true"); status != http.StatusOK || json.Unmarshal(body, &ctrs) != nil {
		t.Errorf("listing the engine's containers: %d %s", status, body)
		return
	}
	if status, body := s.callEngine(http.MethodDelete, "/v4.0.0/libpod/quadlets?all=true&force=true&ignore=true"); status != http.StatusOK {
		t.Errorf("removing the quadlets: %d %s", status, body)
	}
	var pods []struct {
		ID string `json:"Id"`
	}
	if status, body := s.callEngine(http.MethodGet, "/v4.0.0/libpod/pods/json"); status == http.StatusOK && json.Unmarshal(body, &pods) == nil {
		for _, p := range pods {
			if status, body := s.callEngine(http.MethodDelete, "/v4.0.0/libpod/pods/"+p.ID+"?force=true&timeout=0"); status != http.StatusOK && status != http.StatusNotFound {
				t.Errorf("removing pod %s: %d %s", p.ID, status, body)
			}
		}
	}
	for _, c := range ctrs {
		if status, body := s.callEngine(http.MethodDelete, "/v4.0.0/libpod/containers/"+c.ID+"?force=true&timeout=0"); status != http.StatusOK && status != http.StatusNotFound {
			t.Errorf("removing container %s: %d %s", c.ID, status, body)
		}
	}
	for _, c := range ctrs {
		for _, pattern := range []string{"/sys/fs/cgroup/*/berth/berth-" + c.ID, "/sys/fs/cgroup/*/berth/*/berth-" + c.ID} {
			if left, _ := filepath.Glob(pattern); len(left) > 0 {
				t.Errorf("container %s removed, its cgroups left on the host: %v", c.ID, left)
			}
		}
	}
}

// containerLog returns what a container wrote to stdout and stderr so far.
func (s *stack) containerLog(c testcontainers.Container) string {
	logs, err := c.Logs(context.Background())
	if err != nil {
		return fmt.Sprintf("(logs unavailable: %v)", err)
	}
	defer logs.Close()
	data, _ := io.ReadAll(logs)
	return string(data)
}

// dumpLogs prints the tail of both containers' logs, for a failed test.
func (s *stack) dumpLogs() {
	for name, c := range map[string]testcontainers.Container{"engine": s.engine, "uploads": s.uploads} {
		log := s.containerLog(c)
		if len(log) > 20000 {
			log = log[len(log)-20000:]
		}
		s.t.Logf("---- %s container log (tail) ----\n%s", name, log)
	}
}

// hostPort is the container port's address on the host's loopback.
func hostPort(t *testing.T, c testcontainers.Container, port string) string {
	t.Helper()
	mapped, err := c.MappedPort(context.Background(), nat.Port(port))
	if err != nil {
		t.Fatalf("mapped port %s: %v", port, err)
	}
	return net.JoinHostPort("127.0.0.1", mapped.Port())
}

func (s *stack) engineURL() string  { return "http://" + hostPort(s.t, s.engine, enginePort) }
func (s *stack) uploadsURL() string { return "http://" + hostPort(s.t, s.uploads, uploadsPort) }

// callEngine sends one request with the stack's engine token to path on the engine.
func (s *stack) callEngine(method, path string) (int, []byte) {
	s.t.Helper()
	return callWith(s.t, method, s.engineURL()+path, "", nil, http.Header{"Authorization": {"Bearer " + s.engineToken}})
}

// call sends one request and returns status and body.
func call(t *testing.T, method, url, contentType string, body []byte) (int, []byte) {
	t.Helper()
	return callWith(t, method, url, contentType, body, nil)
}

// callWith is call with extra request headers.
func callWith(t *testing.T, method, url, contentType string, body []byte, header http.Header) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, reader)
	if err != nil {
		t.Fatal(err)
	}
	for key, values := range header {
		req.Header[key] = values
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, url, err)
	}
	return resp.StatusCode, data
}

// upload is the uploads API's view of an upload.
type upload struct {
	UUID           string `json:"uuid"`
	Status         string `json:"status"`
	FilesTotal     *int   `json:"filesTotal"`
	FilesProcessed *int   `json:"filesProcessed"`
	Errors         *int   `json:"errors"`
	Images         *int   `json:"images"`
}

type fileError struct {
	File    string `json:"file"`
	Message string `json:"message"`
}

func decode[T any](t *testing.T, data []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("decoding %q: %v", data, err)
	}
	return v
}

// createUpload creates an upload and puts files into it.
func (s *stack) createUpload(files map[string][]byte) string {
	t := s.t
	t.Helper()
	status, body := call(t, http.MethodPost, s.uploadsURL()+"/v1/uploads", "", nil)
	if status != http.StatusCreated {
		t.Fatalf("create upload: %d %s", status, body)
	}
	u := decode[upload](t, body)
	if u.UUID == "" || u.Status != "open" {
		t.Fatalf("created upload = %s", body)
	}
	for path, content := range files {
		status, body := call(t, http.MethodPut, s.uploadsURL()+"/v1/uploads/"+u.UUID+"/files/"+path, "application/octet-stream", content)
		if status != http.StatusNoContent {
			t.Fatalf("put %s: %d %s", path, status, body)
		}
	}
	return u.UUID
}

func (s *stack) markForProcessing(id string) {
	s.t.Helper()
	status, body := call(s.t, http.MethodPost, s.uploadsURL()+"/v1/uploads/"+id+"/markForProcessing", "", nil)
	if status != http.StatusAccepted {
		s.t.Fatalf("markForProcessing: %d %s", status, body)
	}
}

func (s *stack) getUpload(id string) upload {
	s.t.Helper()
	status, body := call(s.t, http.MethodGet, s.uploadsURL()+"/v1/uploads/"+id, "", nil)
	if status != http.StatusOK {
		s.t.Fatalf("get upload: %d %s", status, body)
	}
	return decode[upload](s.t, body)
}

// waitFor polls the upload until cond holds or timeout passes.
func (s *stack) waitFor(id string, timeout time.Duration, what string, cond func(upload) bool) upload {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		u := s.getUpload(id)
		if cond(u) {
			return u
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("upload %s: %s not reached within %v; last state %+v", id, what, timeout, u)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (s *stack) uploadErrors(id string) []fileError {
	s.t.Helper()
	return uploadsGet[[]fileError](s, "/v1/uploads/"+id+"/errors")
}

// uploadsGet reads the uploads API's answer (200) at path as T.
func uploadsGet[T any](s *stack, path string) T {
	s.t.Helper()
	status, body := call(s.t, http.MethodGet, s.uploadsURL()+path, "", nil)
	if status != http.StatusOK {
		s.t.Fatalf("GET %s: %d %s", path, status, body)
	}
	return decode[T](s.t, body)
}

// checkDone fails the test unless the finished upload u counts total
// files, processed of them and errors.
func checkDone(t *testing.T, u upload, total, processed, errors int) {
	t.Helper()
	if intOf(u.FilesTotal) != total || intOf(u.FilesProcessed) != processed || intOf(u.Errors) != errors {
		t.Errorf("done upload counts: total %d processed %d errors %d; want %d, %d, %d",
			intOf(u.FilesTotal), intOf(u.FilesProcessed), intOf(u.Errors), total, processed, errors)
	}
}

// engineImageNames lists every name of every image in the engine.
func (s *stack) engineImageNames() []string {
	s.t.Helper()
	status, body := s.callEngine(http.MethodGet, "/v4.0.0/libpod/images/json")
	if status != http.StatusOK {
		s.t.Fatalf("engine images/json: %d %s", status, body)
	}
	var names []string
	for _, image := range decode[[]struct {
		Names    []string `json:"Names"`
		RepoTags []string `json:"RepoTags"`
	}](s.t, body) {
		names = append(names, image.Names...)
		names = append(names, image.RepoTags...)
	}
	return names
}

func intOf(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}
