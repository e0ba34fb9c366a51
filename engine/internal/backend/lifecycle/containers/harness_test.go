package containers_test

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/engine"
	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

// requireRuntime skips (or fails under BERTH_TEST_STRICT=1) without root,
// runc, conmon or busybox-static.
func requireRuntime(t testing.TB) {
	t.Helper()
	enginetest.RequireRuntime(t, "container tests")
}

// testEngine is an engine serving on a real loopback listener
// (enginetest.Engine) with the package's own helpers.
type testEngine struct{ *enginetest.Engine }

// startEngine serves an in-process engine with the busybox image, its
// containers in a private network namespace by default; tweaks adjust its
// configuration. At cleanup every object is removed and the host checked
// (enginetest.Start).
func startEngine(t testing.TB, tweaks ...func(*engine.Config)) *testEngine {
	t.Helper()
	return &testEngine{enginetest.Start(t, enginetest.Options{What: "container tests",
		Config: func(_ *enginetest.Engine, c *engine.Config) {
			for _, tweak := range tweaks {
				tweak(c)
			}
		}})}
}

// unmountUnder lazily unmounts whatever is still mounted below dir so that
// t.TempDir can be removed even after a failed test.
func unmountUnder(dir string) { enginetest.UnmountUnder(dir, 1) }

// loadBusybox loads the test image (again).
func (te *testEngine) loadBusybox() {
	te.T.Helper()
	te.Load(enginetest.BusyboxImage())
}

func (te *testEngine) create(spec map[string]any) string {
	te.T.Helper()
	if _, ok := spec["image"]; !ok {
		spec["image"] = "busybox"
	}
	var out struct {
		ID       string `json:"Id"`
		Warnings []string
	}
	json.Unmarshal(te.Must(http.StatusCreated, "POST", "/containers/create", spec), &out)
	if len(out.ID) != 64 {
		te.T.Fatalf("create returned id %q", out.ID)
	}
	return out.ID
}

type inspectData struct {
	ID    string `json:"Id"`
	Name  string
	State struct {
		Status     string
		Running    bool
		Paused     bool
		Pid        int
		ConmonPid  int
		ExitCode   int32
		Error      string
		StartedAt  time.Time
		FinishedAt time.Time
		CgroupPath string
	}
	HostConfig struct {
		LogConfig struct{ Path string }
		Ulimits   []struct {
			Name       string
			Soft, Hard int64
		}
		Memory int64
	}
	Rootfs       string
	RestartCount int
}

func (te *testEngine) inspect(id string) inspectData {
	te.T.Helper()
	return enginetest.Fetch[inspectData](te.Engine, "/containers/"+id+"/json")
}

func (te *testEngine) wait(id string, conditions ...string) int32 {
	te.T.Helper()
	q := ""
	for i, c := range conditions {
		if i == 0 {
			q += "?"
		} else {
			q += "&"
		}
		q += "condition=" + c
	}
	var code int32
	if err := json.Unmarshal(te.Must(http.StatusOK, "POST", "/containers/"+id+"/wait"+q, nil), &code); err != nil {
		te.T.Fatal(err)
	}
	return code
}

// run creates, starts and waits for a container and returns its exit code and output.
func (te *testEngine) run(spec map[string]any) (int32, []string) {
	te.T.Helper()
	id := te.create(spec)
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	code := te.wait(id)
	lines := te.LogLines(id)
	te.Must(http.StatusOK, "DELETE", "/containers/"+id, nil)
	return code, lines
}

// leaks lists what removed containers may have left behind: any rootfs
// mount under the engine's root, and what enginetest.Leaks finds of them
// (cgroups, processes naming them, runtime state).
func leaks(root, runRoot string, ids ...string) []string {
	var out []string
	data, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], root+"/") && strings.HasSuffix(f[4], "/merged") {
			out = append(out, "mount: "+f[4])
		}
	}
	return append(out, enginetest.Leaks(root, runRoot, nil, ids)...)
}

// noLeaks fails the test when the removed containers ids left anything
// behind (leaks).
func (te *testEngine) noLeaks(ids ...string) {
	te.T.Helper()
	if l := leaks(te.Root, te.RunRoot, ids...); len(l) > 0 {
		te.T.Fatalf("leaked: %v", l)
	}
}

// showMounted is GET /containers/showmounted: the containers whose rootfs
// is mounted, by ID, with the mount points.
func (te *testEngine) showMounted() map[string]string {
	te.T.Helper()
	return enginetest.Fetch[map[string]string](te.Engine, "/containers/showmounted")
}

// mountsWhere counts the host's mounts whose mount point passes match.
func mountsWhere(match func(mountPoint string) bool) int {
	data, _ := os.ReadFile("/proc/self/mountinfo")
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && match(f[4]) {
			n++
		}
	}
	return n
}

// waitLog waits until a container's log has at least n lines.
func (te *testEngine) waitLog(id string, n int) []string {
	te.T.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if lines := te.LogLines(id); len(lines) >= n {
			return lines
		}
		if time.Now().After(deadline) {
			te.T.Fatalf("container %s logged fewer than %d lines", id, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
