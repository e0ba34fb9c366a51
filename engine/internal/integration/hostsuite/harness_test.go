package hostsuite

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/testimage"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

// lab is an engine under test (the shared one, one of the test's own or
// a berth-engine process) and what the host suite asks of it.
type lab struct{ *enginetest.Engine }

// labOptions are the host suite's engine options: its image, containers
// in a private network namespace unless they name the bridge.
func labOptions() enginetest.Options {
	img := labImage()
	return enginetest.Options{What: "host suite tests", Image: &img}
}

// startLab returns the in-process engine the suite's tests share (one
// engine start and image load instead of one per test keeps the suite
// short in the host lab's emulated VM); what the test creates is removed
// when it ends.
func startLab(t testing.TB) *lab {
	t.Helper()
	return &lab{enginetest.Shared(t, labOptions())}
}

// startEngineProcess starts the berth-engine binary (in the host lab the
// static one BERTH_ENGINE_BIN names) with its own root and networks;
// extra are further engine flags.
func startEngineProcess(t *testing.T, extra ...string) *enginetest.Process {
	t.Helper()
	o := labOptions()
	o.Args = extra
	return enginetest.StartProcess(t, o)
}

// labImage is the suite's image, localhost/busybox:latest, with httpd for
// the bridge tests' published port.
func labImage() testimage.Image {
	img := enginetest.BusyboxImage()
	img.Layers = []testimage.Layer{{Files: []testimage.File{{Path: "bin/httpd", Linkname: "busybox"}}}}
	return img
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
	l.T.Helper()
	return enginetest.Fetch[inspectData](l.Engine, "/containers/"+id+"/json")
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
	l.T.Helper()
	var out struct {
		Error any
		Stats []containerStats
	}
	l.Get("/containers/stats?stream=false&containers="+id, &out)
	if len(out.Stats) != 1 {
		l.T.Fatalf("stats of %s: %+v", id, out)
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
