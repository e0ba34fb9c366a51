package hostsuite

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
)

// TestContainersSurviveEngineKill: a container keeps running while its
// engine is killed with SIGKILL; the restarted engine adopts it, reads its
// cgroup (stats, update) and removes it without leaving its cgroup behind.
// A container that exits while no engine watches is recorded as exited.
func TestContainersSurviveEngineKill(t *testing.T) {
	testdeadline.Set(t, testdeadline.Default)
	enginetest.RequireRuntime(t, "host suite tests")
	bin := engineBinary(t)
	dir := t.TempDir()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	root, runRoot := filepath.Join(dir, "root"), filepath.Join(dir, "run")
	nets := enginetest.UniqueNetworks(t)
	nets.DefaultMode = "private"
	args := append([]string{"--listen", "tcp://" + addr, "--root", root, "--runroot", runRoot}, enginetest.NetworkFlags(nets)...)
	// The engine's log is shown only when the test fails.
	logPath := filepath.Join(dir, "engine.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		logFile.Close()
		if t.Failed() {
			data, _ := os.ReadFile(logPath)
			t.Logf("engine log:\n%s", data)
		}
	})
	var cmd *exec.Cmd
	start := func() {
		cmd = exec.Command(bin, args...)
		cmd.Stderr = logFile
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		eventually(t, 60*time.Second, "the engine answering _ping", func() bool {
			resp, err := http.Get("http://" + addr + "/libpod/_ping")
			if err == nil {
				resp.Body.Close()
			}
			return err == nil
		})
	}
	start()
	l := &lab{t: t, url: "http://" + addr + "/v4.3.1/libpod", root: root, runRoot: runRoot, client: &http.Client{}}
	t.Cleanup(func() {
		l.removeAll()
		if cmd.ProcessState == nil {
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
		}
		enginetest.UnmountUnder(dir, 3)
	})
	l.loadBusybox()
	long := l.run(map[string]any{"name": "long", "command": []string{"sleep", "900"},
		"resource_limits": map[string]any{"memory": map[string]any{"limit": 64 << 20}}})
	short := l.run(map[string]any{"name": "short", "command": []string{"sleep", "2"}})
	cg := l.inspect(long).State.CgroupPath

	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	time.Sleep(3 * time.Second) // short exits while no engine watches
	start()

	if d := l.inspect(long); !d.State.Running {
		t.Fatalf("long after the restart: %+v", d.State)
	}
	eventually(t, 10*time.Second, "short recorded as exited", func() bool {
		d := l.inspect(short)
		return d.State.Status == "exited" && d.State.ExitCode == 0
	})
	if s := l.stats(long); s.MemLimit != 64<<20 || s.PIDs != 1 {
		t.Fatalf("stats of the adopted container: %+v", s)
	}
	l.must(http.StatusCreated, "POST", "/containers/long/update", map[string]any{"memory": map[string]any{"limit": 96 << 20}})
	if got := readCgroup(t, cg, "memory", "memory.limit_in_bytes", "memory.max"); got != strconv.Itoa(96<<20) {
		t.Fatalf("memory limit after update: %s", got)
	}
	l.must(http.StatusOK, "DELETE", "/containers/long?force=true&timeout=0", nil)
	if _, err := os.Stat(cgroupFile(cg, "memory", "", "")); !os.IsNotExist(err) {
		t.Fatalf("the removed container's cgroup %s is still there: %v", cg, err)
	}
}
