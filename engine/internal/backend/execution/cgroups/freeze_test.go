package cgroups

import (
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/freezertest"
)

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
	t.Cleanup(func() {
		for i := 0; i < 100 && os.Remove(dir) != nil; i++ {
			time.Sleep(10 * time.Millisecond)
		}
	})
	read := func() string { return freezertest.State(dir) }
	loop := freezertest.StartExecLoop(t, dir)
	freezertest.Wedge(t, dir)
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
	if err := loop.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the exec loop is gone: %v", err)
	}
}
