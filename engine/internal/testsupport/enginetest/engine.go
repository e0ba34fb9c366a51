package enginetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/engine"
	"github.com/berth-project/berth/engine/internal/testsupport/benchtest"
	"github.com/berth-project/berth/engine/internal/testsupport/need"
	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
	"github.com/berth-project/berth/engine/testimage"
)

// Engine is a test's client of an in-process engine serving on a loopback
// listener, as Start makes it.
type Engine struct {
	T       testing.TB
	Addr    string // host:port of the listener
	URL     string // base of the libpod API: http://ADDR/v4.3.1/libpod
	Dir     string // the test directory holding Root and RunRoot
	Root    string
	RunRoot string
	Nets    engine.NetworkConfig // the engine's networks, unique to the test
	Client  *http.Client
	// Eng is the in-process engine Start serves (its stores for the tests
	// that look below the API); nil for Attach and StartProcess.
	Eng *engine.Engine
}

// Options choose what Start serves.
type Options struct {
	// What names the tests in skip and failure messages ("pod tests").
	What string
	// Needs are files beyond the runtime's that the tests need
	// (catatonit, netavark): the test is skipped (fails under
	// BERTH_TEST_STRICT=1) without them.
	Needs []string
	// Bridged makes containers that name no network mode join the
	// engine's bridge network; without it they get a private network
	// namespace with loopback only.
	Bridged bool
	// Image is loaded at start; nil loads BusyboxImage.
	Image *testimage.Image
	// Network, if set, adjusts the engine's network configuration (unique
	// to the test) before it starts.
	Network func(*engine.NetworkConfig)
	// Args are more flags for an engine StartProcess runs.
	Args []string
	// Config, if set, adjusts the configuration of an engine Start serves
	// (its directories are made).
	Config func(*Engine, *engine.Config)
	// Logger receives the log of an engine Start serves; nil discards it.
	Logger *slog.Logger
	// NoImage starts the engine without an image (Image is ignored).
	NoImage bool
	// LongDir puts the engine's root and run root more than 108 bytes
	// deep, past the limit of a unix socket address, so that the tests
	// show conmon's attach socket (and every other socket the engine
	// reaches under them) still works: they are dialled and bound through
	// /proc/self/fd, as Podman does, never by their full path.
	LongDir bool
	// BeforeStop runs at cleanup once every pod, container, secret and
	// volume is removed, before the engine stops; AfterStop once it has
	// stopped and its mounts are gone.
	BeforeStop, AfterStop func(*Engine)
}

// Catatonit and the network helpers are the files pod and network tests need.
const (
	Catatonit   = "/usr/bin/catatonit"
	Netavark    = "/usr/lib/podman/netavark"
	AardvarkDNS = "/usr/lib/podman/aardvark-dns"
)

// BusyboxImage is localhost/busybox:latest running sh.
func BusyboxImage() testimage.Image { return testimage.Busybox("localhost/busybox:latest", "sh") }

// Require skips t (fails it under BERTH_TEST_STRICT=1) when one of the
// files or programs is missing (see need.All); what names the tests.
func Require(t testing.TB, what string, needs ...string) {
	t.Helper()
	need.All(t, what, needs...)
}

// Start serves an engine with its state in a directory of the test, under
// the default per-test deadline, and loads the test image. At cleanup it
// removes every object (RemoveAll), stops the engine, fails the test for
// whatever the engine left on the host (HostLeaks) and unmounts what is
// left below the directory.
func Start(t testing.TB, o Options) *Engine {
	t.Helper()
	e := prepare(t, o)
	cfg := engine.Config{Root: e.Root, RunRoot: e.RunRoot, Runtime: "runc", Network: e.Nets}
	if o.Config != nil {
		o.Config(e, &cfg)
	}
	var stop func()
	e.Eng, e.Addr, stop = serve(t, o.Logger, cfg)
	e.URL = libpodURL(e.Addr)
	t.Cleanup(func() {
		pods, ctrs := e.objectIDs()
		e.RemoveAll()
		if o.BeforeStop != nil {
			o.BeforeStop(e)
		}
		stop()
		e.checkHost(pods, ctrs)
		UnmountUnder(e.Dir, 2)
		if o.AfterStop != nil {
			o.AfterStop(e)
		}
	})
	e.loadImage(o)
	return e
}

// prepare checks for what the tests need and gives an engine about to
// start its directories and networks.
func prepare(t testing.TB, o Options) *Engine {
	t.Helper()
	testdeadline.Set(t, testdeadline.Default)
	RequireRuntime(t, o.What)
	Require(t, o.What, o.Needs...)
	dir := testDir(t, o.LongDir)
	e := &Engine{T: t, Dir: dir, Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, "run"), Nets: UniqueNetworks(t), Client: &http.Client{}}
	if !o.Bridged {
		e.Nets.DefaultMode = "private"
	}
	if o.Network != nil {
		o.Network(&e.Nets)
	}
	return e
}

// testDir is the directory of a test's engine: the test's own, or with
// long one of its subdirectories more than 108 bytes deep.
func testDir(t testing.TB, long bool) string {
	t.Helper()
	dir := t.TempDir()
	if !long {
		return dir
	}
	for len(dir) <= 120 {
		dir = filepath.Join(dir, "a-deliberately-long-directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

func (e *Engine) loadImage(o Options) {
	e.T.Helper()
	switch {
	case o.NoImage:
	case o.Image != nil:
		e.Load(*o.Image)
	default:
		e.Load(BusyboxImage())
	}
}

// Attach returns a client of the engine, or the Podman service, listening
// on addr (host:port); it starts and stops nothing.
func Attach(t testing.TB, addr string) *Engine {
	return &Engine{T: t, Addr: addr, URL: libpodURL(addr), Client: &http.Client{}}
}

func libpodURL(addr string) string { return "http://" + addr + "/v4.3.1/libpod" }

// Load loads images into the engine.
func (e *Engine) Load(images ...testimage.Image) {
	e.T.Helper()
	for _, img := range images {
		var buf bytes.Buffer
		if err := testimage.DockerArchive(&buf, img); err != nil {
			e.T.Fatal(err)
		}
		e.Must(http.StatusOK, "POST", "/images/load", &buf)
	}
}

// Do sends a request to the libpod API (see the package's Do) and returns
// the status and body.
func (e *Engine) Do(method, path string, body any) (int, []byte) {
	e.T.Helper()
	return Do(e.T, e.Client, method, e.URL, path, body)
}

// Must sends a request and fails the test unless the answer has the wanted
// status; it returns the body.
func (e *Engine) Must(want int, method, path string, body any) []byte {
	e.T.Helper()
	return Must(e.T, e.Do, want, method, path, body)
}

// Raw sends body with a content type and returns the status and answer.
func (e *Engine) Raw(method, path, contentType string, body io.Reader) (int, []byte) {
	e.T.Helper()
	status, _, data := e.Exchange(method, e.URL+path, contentType, body)
	return status, data
}

// Exchange sends body with a content type to a whole URL (the engine's
// Base and any path, the API's version included) and returns the
// answer's status, header and body.
func (e *Engine) Exchange(method, url, contentType string, body io.Reader) (int, http.Header, []byte) {
	e.T.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		e.T.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := e.Client.Do(req)
	if err != nil {
		e.T.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		e.T.Fatalf("%s %s: reading the answer: %v", method, url, err)
	}
	return resp.StatusCode, resp.Header, data
}

// Base is the engine's address as a URL: http://ADDR.
func (e *Engine) Base() string { return "http://" + e.Addr }

// Decode unmarshals JSON into v or fails the test naming the data.
func (e *Engine) Decode(data []byte, v any) {
	e.T.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		e.T.Fatalf("decode %s: %v", data, err)
	}
}

// Get reads path (answered 200) into v, failing the test otherwise.
func (e *Engine) Get(path string, v any) {
	e.T.Helper()
	e.Decode(e.Must(http.StatusOK, "GET", path, nil), v)
}

// Fetch is Get answering a new T.
func Fetch[T any](e *Engine, path string) T {
	e.T.Helper()
	var v T
	e.Get(path, &v)
	return v
}

// ContainerCount is how many containers the engine has, in every state
// (infra containers included).
func (e *Engine) ContainerCount() int {
	e.T.Helper()
	return len(Fetch[[]json.RawMessage](e, "/containers/json?all=true"))
}

// Create creates a container from spec (busybox when it names no image)
// and returns its ID.
func (e *Engine) Create(spec map[string]any) string {
	e.T.Helper()
	if spec["image"] == nil {
		spec["image"] = "localhost/busybox:latest"
	}
	var out struct {
		ID string `json:"Id"`
	}
	e.Decode(e.Must(http.StatusCreated, "POST", "/containers/create", spec), &out)
	return out.ID
}

// Run creates a container from spec (see Create), starts it and returns
// its ID.
func (e *Engine) Run(spec map[string]any) string {
	e.T.Helper()
	id := e.Create(spec)
	e.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	return id
}

// RunOnce creates a container from spec, starts it, waits for it to exit
// (with 0) and removes it, and answers how long that took: the cycle the
// run benchmarks time, on Berth or on Podman alike.
func (e *Engine) RunOnce(spec map[string]any) time.Duration {
	e.T.Helper()
	start := time.Now()
	id := e.Create(spec)
	e.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	if code := e.Wait(id); code != 0 {
		e.T.Fatalf("container %s exited %d", id, code)
	}
	if status, body := e.Do("DELETE", "/containers/"+id, nil); status != http.StatusOK && status != http.StatusNoContent {
		e.T.Fatalf("remove: %d %s", status, body)
	}
	return time.Since(start)
}

// CompareRuns is the run benchmarks' comparison: benchtest.Compare of
// RunOnce(spec) on berth and on podman, rounds pairs of runs with pauses
// after each (see benchtest.Alternate).
func CompareRuns(b *testing.B, what, goal string, rounds int, pauses [2]time.Duration, spec map[string]any, berth, podman *Engine) {
	b.Helper()
	benchtest.Compare(b, what, goal, "runs", rounds, pauses,
		func(int) time.Duration { return berth.RunOnce(spec) }, func(int) time.Duration { return podman.RunOnce(spec) })
}

// CreatePod creates a pod from spec and returns its ID.
func (e *Engine) CreatePod(spec map[string]any) string {
	e.T.Helper()
	var out struct {
		ID string `json:"Id"`
	}
	e.Decode(e.Must(http.StatusCreated, "POST", "/pods/create", spec), &out)
	return out.ID
}

// Wait waits for a container to exit and returns its exit code.
func (e *Engine) Wait(id string) int {
	e.T.Helper()
	var code int
	e.Decode(e.Must(http.StatusOK, "POST", "/containers/"+id+"/wait", nil), &code)
	return code
}

// Logs returns a container's output, stdout and stderr interleaved.
func (e *Engine) Logs(id string) string {
	e.T.Helper()
	return Demux(e.Must(http.StatusOK, "GET", "/containers/"+id+"/logs?stdout=true&stderr=true", nil))
}

// LogLines is the message of each line of a container's k8s-file log,
// read from the driver's file (none while there is no file yet).
func (e *Engine) LogLines(id string) []string {
	e.T.Helper()
	var d struct {
		HostConfig struct{ LogConfig struct{ Path string } }
	}
	e.Decode(e.Must(http.StatusOK, "GET", "/containers/"+id+"/json", nil), &d)
	data, err := os.ReadFile(d.HostConfig.LogConfig.Path)
	if err != nil && !os.IsNotExist(err) {
		e.T.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		if parts := strings.SplitN(line, " ", 4); len(parts) == 4 {
			out = append(out, parts[3])
		}
	}
	return out
}

// Demux returns the payload of a multiplexed attach or logs stream
// without its 8-byte frame headers.
func Demux(b []byte) string {
	var out strings.Builder
	for len(b) >= 8 {
		n := int(b[4])<<24 | int(b[5])<<16 | int(b[6])<<8 | int(b[7])
		if 8+n > len(b) {
			break
		}
		out.Write(b[8 : 8+n])
		b = b[8+n:]
	}
	return out.String()
}

// RemoveAll removes every quadlet (with what its activation made) and
// pod, then every container, secret, volume and network but the default
// one left.
func (e *Engine) RemoveAll() {
	e.Do("DELETE", "/quadlets?all=true&force=true", nil)
	if status, body := e.Do("GET", "/pods/json", nil); status == http.StatusOK {
		var pods []struct {
			ID string `json:"Id"`
		}
		json.Unmarshal(body, &pods)
		for _, p := range pods {
			e.Do("DELETE", "/pods/"+p.ID+"?force=true&timeout=0", nil)
		}
	}
	RemoveAll(e.Do)
	e.Do("DELETE", "/secrets/all?all=true", nil)
	e.Do("POST", "/volumes/prune", nil)
	if status, body := e.Do("GET", "/networks/json", nil); status == http.StatusOK {
		var nets []struct {
			Name string `json:"name"`
		}
		json.Unmarshal(body, &nets)
		for _, n := range nets {
			if n.Name != "podman" && n.Name != e.Nets.DefaultNetwork {
				e.Do("DELETE", "/networks/"+n.Name+"?force=true", nil)
			}
		}
	}
}

// RequirePodman skips t (fails it under BERTH_TEST_STRICT=1) when the
// podman 4.3.1 client is not installed.
func RequirePodman(t testing.TB) {
	t.Helper()
	Require(t, "podman client tests", "podman")
}

// Podman runs the podman 4.3.1 client against the engine and returns its
// output, stdout and stderr together; the test is skipped (fails under
// BERTH_TEST_STRICT=1) when podman is not installed.
func (e *Engine) Podman(args ...string) (string, error) {
	e.T.Helper()
	RequirePodman(e.T)
	out, err := e.PodmanCommand(args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("podman %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// MustPodman is Podman failing the test when podman fails.
func (e *Engine) MustPodman(args ...string) string {
	e.T.Helper()
	out, err := e.Podman(args...)
	if err != nil {
		e.T.Fatal(err)
	}
	return out
}

// PodmanStdout is MustPodman returning standard output alone (YAML or
// JSON that warnings on stderr must not mix with).
func (e *Engine) PodmanStdout(args ...string) string {
	e.T.Helper()
	out, errOut, err := e.PodmanOutput(args...)
	if err != nil {
		e.T.Fatalf("podman %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// PodmanOutput is Podman answering standard output and standard error
// apart.
func (e *Engine) PodmanOutput(args ...string) (stdout, stderr string, err error) {
	e.T.Helper()
	RequirePodman(e.T)
	var out, errOut strings.Builder
	cmd := e.PodmanCommand(args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// PodmanCommand is the podman 4.3.1 client's command with args against the engine.
func (e *Engine) PodmanCommand(args ...string) *exec.Cmd {
	return exec.Command("podman", append([]string{"--remote", "--url", "tcp://" + e.Addr}, args...)...)
}

// AttachPodman is a client of the Podman service at url (tcp://HOST:PORT, as
// hack/bench.sh exports it) with img loaded; every object of it is removed
// at cleanup.
func AttachPodman(t testing.TB, url string, img testimage.Image) *Engine {
	t.Helper()
	e := Attach(t, strings.TrimPrefix(url, "tcp://"))
	e.Load(img)
	t.Cleanup(e.RemoveAll)
	return e
}
