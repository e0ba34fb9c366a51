// Package freezertest wedges a cgroup v1 freezer the way the kernel does
// when a freeze meets a multi-threaded execve: the exec waits for a thread
// that the freezer has frozen, and the cgroup stays FREEZING for ever.
// Tests of the engine's freezer handling put an exec loop in a cgroup
// (StartExecLoop) and wedge its freezer (Wedge).
package freezertest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// StartExecLoop builds and starts the exec loop (./execloop: a process
// that execs itself again and again with a few threads running, as runc
// init does once) and moves it into the cgroup whose v1 freezer directory
// is dir. It is killed when the test ends.
func StartExecLoop(t testing.TB, dir string) *exec.Cmd {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "execloop")
	build := exec.Command("go", "build", "-o", bin, "github.com/berth-project/berth/engine/internal/testsupport/freezertest/execloop")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the exec loop: %v\n%s", err, out)
	}
	loop := exec.Command(bin)
	if err := loop.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Thawed first: a frozen process does not die of SIGKILL on v1.
		os.WriteFile(filepath.Join(dir, "freezer.state"), []byte("THAWED"), 0o644)
		loop.Process.Kill()
		loop.Wait()
	})
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(loop.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	return loop
}

// State reads the v1 freezer state in directory dir.
func State(dir string) string {
	data, _ := os.ReadFile(filepath.Join(dir, "freezer.state"))
	return strings.TrimSpace(string(data))
}

// Wedge freezes the cgroup of freezer directory dir, with an exec loop in
// it, the way a plain freezer loop does (FROZEN written until the kernel
// says FROZEN), and thaws it again, until one freeze stays FREEZING for
// 300 ms: the wedge. It fails the test when 2,000 tries made none.
func Wedge(t testing.TB, dir string) {
	t.Helper()
	file := filepath.Join(dir, "freezer.state")
	for try := 0; try < 2000; try++ {
		os.WriteFile(file, []byte("FROZEN"), 0o644)
		for start := time.Now(); State(dir) == "FREEZING"; time.Sleep(time.Millisecond) {
			if time.Since(start) > 300*time.Millisecond {
				return
			}
			os.WriteFile(file, []byte("FROZEN"), 0o644)
		}
		os.WriteFile(file, []byte("THAWED"), 0o644)
		time.Sleep(time.Duration(1+try%5) * time.Millisecond)
	}
	t.Fatal("no freeze of the exec loop wedged in 2000 tries")
}
