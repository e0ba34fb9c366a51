package hostsuite

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containers/storage/pkg/reexec"

	"github.com/berth-project/berth/engine/internal/engine"
	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
	"github.com/berth-project/berth/engine/testimage"
)

func TestMain(m *testing.M) {
	if reexec.Init() {
		return
	}
	code := m.Run()
	if shared.stop != nil {
		shared.stop()
	}
	os.Exit(code)
}

// shared is the engine the tests share (each removes what it created): one
// engine start and image load instead of one per test keeps the suite
// short in the host lab's emulated VM.
var shared struct {
	once    sync.Once
	err     string
	url     string
	root    string
	runRoot string
	stop    func()
}

// lab is an engine under test and what the tests ask of it.
type lab struct {
	t       testing.TB
	url     string
	root    string
	runRoot string
	client  *http.Client
}

// startLab returns the shared in-process engine (started by the first
// test that asks), whose containers default to a private network
// namespace; what the test creates is removed when it ends.
func startLab(t testing.TB) *lab {
	t.Helper()
	testdeadline.Set(t, testdeadline.Default)
	enginetest.RequireRuntime(t, "host suite tests")
	shared.once.Do(func() {
		// A short path: conmon's attach socket (RUNROOT/socket/ID/attach) must fit a
		// unix socket address (108 bytes).
		dir, err := os.MkdirTemp("", "bh")
		if err != nil {
			shared.err = err.Error()
			return
		}
		nets := enginetest.UniqueNetworks(t)
		nets.DefaultMode = "private"
		shared.root, shared.runRoot = filepath.Join(dir, "root"), filepath.Join(dir, "run")
		addr, stop := enginetest.ServeConfig(t, engine.Config{Root: shared.root, RunRoot: shared.runRoot, Runtime: "runc", Network: nets})
		shared.url = "http://" + addr + "/v4.3.1/libpod"
		shared.stop = func() {
			stop()
			enginetest.UnmountUnder(dir, 2)
			os.RemoveAll(dir)
		}
		l := &lab{t: t, url: shared.url, client: &http.Client{}}
		l.loadBusybox()
	})
	if shared.url == "" {
		t.Fatalf("the shared engine did not start: %s", shared.err)
	}
	l := &lab{t: t, url: shared.url, root: shared.root, runRoot: shared.runRoot, client: &http.Client{}}
	t.Cleanup(l.removeAll)
	return l
}

func requireFile(t testing.TB, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("BERTH_TEST_STRICT") == "1" {
			t.Fatalf("needs %s (BERTH_TEST_STRICT=1)", path)
		}
		t.Skipf("needs %s", path)
	}
}

func (l *lab) loadBusybox() {
	l.t.Helper()
	l.must(http.StatusOK, "POST", "/images/load", busyboxArchive(l.t))
}

// busyboxArchive is the suite's image, localhost/busybox:latest, as a
// docker archive (what /images/load and podman load take).
func busyboxArchive(t testing.TB) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	img := testimage.Busybox("localhost/busybox:latest", "sh")
	img.Config.StopSignal = ""
	// httpd serves the bridge tests' published port.
	img.Layers = []testimage.Layer{{Files: []testimage.File{{Path: "bin/httpd", Linkname: "busybox"}}}}
	if err := testimage.DockerArchive(&buf, img); err != nil {
		t.Fatal(err)
	}
	return &buf
}

func (l *lab) do(method, path string, body any) (int, []byte) {
	l.t.Helper()
	return enginetest.Do(l.t, l.client, method, l.url, path, body)
}

func (l *lab) must(want int, method, path string, body any) []byte {
	l.t.Helper()
	return enginetest.Must(l.t, l.do, want, method, path, body)
}

func (l *lab) decode(data []byte, v any) {
	l.t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		l.t.Fatalf("decode %s: %v", data, err)
	}
}

// removeAll removes every pod, then every container left.
func (l *lab) removeAll() {
	status, body := l.do("GET", "/pods/json", nil)
	if status == http.StatusOK {
		var pods []struct {
			ID string `json:"Id"`
		}
		json.Unmarshal(body, &pods)
		for _, p := range pods {
			l.do("DELETE", "/pods/"+p.ID+"?force=true&timeout=0", nil)
		}
	}
	enginetest.RemoveAll(l.do)
}

// create creates a busybox container from a SpecGenerator (image and
// a name-less default filled in) and returns its ID.
func (l *lab) create(spec map[string]any) string {
	l.t.Helper()
	if spec["image"] == nil {
		spec["image"] = "localhost/busybox:latest"
	}
	var out struct {
		ID string `json:"Id"`
	}
	l.decode(l.must(http.StatusCreated, "POST", "/containers/create", spec), &out)
	return out.ID
}

// run creates and starts a container.
func (l *lab) run(spec map[string]any) string {
	l.t.Helper()
	id := l.create(spec)
	l.must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	return id
}

type inspectData struct {
	ID    string `json:"Id"`
	State struct {
		Status     string
		Running    bool
		Paused     bool
		OOMKilled  bool
		Pid        int
		ExitCode   int32
		CgroupPath string
	}
	HostConfig struct {
		Memory       int64
		MemorySwap   int64
		PidsLimit    int64
		CpuQuota     int64
		CpuPeriod    int64
		CpuShares    uint64
		CpusetCpus   string
		CgroupnsMode string
	}
}

func (l *lab) inspect(id string) inspectData {
	l.t.Helper()
	var d inspectData
	l.decode(l.must(http.StatusOK, "GET", "/containers/"+id+"/json", nil), &d)
	return d
}

// wait waits for the container to exit and returns its exit code.
func (l *lab) wait(id string) int {
	l.t.Helper()
	var code int
	l.decode(l.must(http.StatusOK, "POST", "/containers/"+id+"/wait", nil), &code)
	return code
}

// containerStats is the part of Podman's ContainerStats the tests read.
type containerStats struct {
	ContainerID string
	CPUNano     uint64
	MemUsage    uint64
	MemLimit    uint64
	PIDs        uint64
	BlockInput  uint64
	BlockOutput uint64
	NetInput    uint64
	NetOutput   uint64
}

func (l *lab) stats(id string) containerStats {
	l.t.Helper()
	var out struct {
		Error any
		Stats []containerStats
	}
	l.decode(l.must(http.StatusOK, "GET", "/containers/stats?stream=false&containers="+id, nil), &out)
	if len(out.Stats) != 1 {
		l.t.Fatalf("stats of %s: %+v", id, out)
	}
	return out.Stats[0]
}

// unified reports whether the host runs the unified cgroup v2 hierarchy.
func unified() bool {
	var fs syscall.Statfs_t
	return syscall.Statfs("/sys/fs/cgroup", &fs) == nil && fs.Type == 0x63677270
}

// cgroupFile is a control file of cgroup cg: controller's v1 file, or
// the v2 file on the unified hierarchy.
func cgroupFile(cg, controller, v1, v2 string) string {
	if unified() {
		return filepath.Join("/sys/fs/cgroup", cg, v2)
	}
	return filepath.Join("/sys/fs/cgroup", controller, cg, v1)
}

// readCgroup reads a control file (see cgroupFile), trimmed.
func readCgroup(t testing.TB, cg, controller, v1, v2 string) string {
	t.Helper()
	data, err := os.ReadFile(cgroupFile(cg, controller, v1, v2))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// pick is v1 on cgroup v1 hosts, v2 on unified ones.
func pick(v1, v2 string) string {
	if unified() {
		return v2
	}
	return v1
}

// eventually polls cond every 50ms until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
	}
}

// engineBinary is a berth-engine to start as a process: BERTH_ENGINE_BIN
// (the host lab copies one into the VM), else one built now.
func engineBinary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("BERTH_ENGINE_BIN"); bin != "" {
		return bin
	}
	if testing.Short() {
		t.Skip("builds and runs the engine binary")
	}
	bin := filepath.Join(t.TempDir(), "berth-engine")
	build := exec.Command("go", "build", "-o", bin, "github.com/berth-project/berth/engine/cmd/berth-engine")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build berth-engine: %v\n%s", err, out)
	}
	return bin
}
