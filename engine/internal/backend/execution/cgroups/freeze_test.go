package cgroups

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// execLoopEnv makes the test binary the helper of TestFreezeThroughExecs:
// a multi-threaded process that execs itself again and again, as runc init
// does once when it starts a container's command.
const execLoopEnv = "BERTH_CGROUPS_EXEC_LOOP"

func TestMain(m *testing.M) {
	if os.Getenv(execLoopEnv) == "1" {
		for range 4 {
			go func() {
				for {
					time.Sleep(time.Microsecond)
				}
			}()
		}
		time.Sleep(time.Millisecond)
		syscall.Exec("/proc/self/exe", os.Args[:1], os.Environ())
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// TestFreezeThroughExecs: on a v1 freezer, a freeze that meets an execve of
// a multi-threaded process can stay FREEZING for ever (the exec waits for a
// thread the freezer has frozen). SettleFreezer thaws such a cgroup, and
// Freeze freezes through it every time (before: "not FROZEN within 2s",
// and the cgroup left FREEZING, a few times in a hundred freezes).
func TestFreezeThroughExecs(t *testing.T) {
	h := Host()
	if h.Unified() || !h.HasController("freezer") {
		t.Skip("needs a cgroup v1 freezer hierarchy")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	cg := "/berthtest-freeze-" + strconv.Itoa(os.Getpid())
	dir := h.Dir("freezer", cg)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "freezer.state")
	read := func() string {
		data, _ := os.ReadFile(state)
		return strings.TrimSpace(string(data))
	}
	helper := exec.Command("/proc/self/exe")
	helper.Env = append(os.Environ(), execLoopEnv+"=1")
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.WriteFile(state, []byte("THAWED"), 0o644)
		helper.Process.Kill()
		helper.Wait()
		for i := 0; i < 100 && os.Remove(dir) != nil; i++ {
			time.Sleep(10 * time.Millisecond)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(helper.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}

	// A wedged freeze, made the way a plain freezer loop makes one: FROZEN
	// written until the kernel says FROZEN, or until it has said FREEZING
	// for 300 ms.
	wedged := false
	for try := 0; try < 2000 && !wedged; try++ {
		os.WriteFile(state, []byte("FROZEN"), 0o644)
		for start := time.Now(); read() == "FREEZING"; time.Sleep(time.Millisecond) {
			if time.Since(start) > 300*time.Millisecond {
				wedged = true
				break
			}
			os.WriteFile(state, []byte("FROZEN"), 0o644)
		}
		if !wedged {
			os.WriteFile(state, []byte("THAWED"), 0o644)
			time.Sleep(time.Duration(1+try%5) * time.Millisecond)
		}
	}
	if !wedged {
		t.Fatal("no freeze of the exec loop wedged in 2000 tries")
	}
	if !h.SettleFreezer(cg, 200*time.Millisecond) {
		t.Fatalf("SettleFreezer did not thaw a wedged freezer (%s)", read())
	}
	if got := read(); got == "FREEZING" {
		t.Fatalf("after SettleFreezer the freezer is %s", got)
	}

	const rounds = 300
	for i := range rounds {
		if err := h.Freeze(cg, true); err != nil {
			t.Fatalf("freeze %d of %d: %v (the freezer reads %s)", i+1, rounds, err, read())
		}
		if got := read(); got != "FROZEN" {
			t.Fatalf("freeze %d: the freezer reads %s", i+1, got)
		}
		if err := h.Freeze(cg, false); err != nil {
			t.Fatalf("thaw %d: %v", i+1, err)
		}
		time.Sleep(time.Duration(1+i%7) * time.Millisecond)
	}
	// The helper still runs: the freezes never killed it.
	if err := helper.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the exec loop is gone: %v", err)
	}
}
