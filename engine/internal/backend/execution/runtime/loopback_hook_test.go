package runtime

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containers/storage/pkg/reexec"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
)

// TestMain lets the test binary run as the engine's re-executed helpers
// (the restore's loopback hook).
func TestMain(m *testing.M) {
	if reexec.Init() {
		return
	}
	os.Exit(m.Run())
}

// TestRestoreLoopbackHook: run as runc runs a hook (the state on stdin),
// the restore's loopback hook sets lo up in the network namespace of the
// state's process, which a new namespace has down; a state without a
// process is refused.
func TestRestoreLoopbackHook(t *testing.T) {
	requireTools(t)
	testdeadline.Set(t, time.Minute)
	sleeper := exec.Command(busybox, "sleep", "60")
	sleeper.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	loUp := func() bool {
		t.Helper()
		ns, err := netns.GetFromPid(sleeper.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		defer ns.Close()
		h, err := netlink.NewHandleAt(ns)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		lo, err := h.LinkByName("lo")
		if err != nil {
			t.Fatal(err)
		}
		return lo.Attrs().Flags&net.FlagUp != 0
	}
	if loUp() {
		t.Fatal("lo is up in a new network namespace before the hook ran")
	}
	hook, err := RestoreLoopbackHook()
	if err != nil {
		t.Fatal(err)
	}
	run := func(st specs.State) ([]byte, error) {
		state, _ := json.Marshal(st)
		cmd := &exec.Cmd{Path: hook.Path, Args: hook.Args, Stdin: bytes.NewReader(state)}
		return cmd.CombinedOutput()
	}
	if out, err := run(specs.State{Version: specs.Version, ID: "c", Status: specs.StateCreating, Pid: sleeper.Process.Pid}); err != nil {
		t.Fatalf("hook: %v: %s", err, out)
	}
	if !loUp() {
		t.Fatal("lo is still down after the hook")
	}
	out, err := run(specs.State{Version: specs.Version, ID: "c", Status: specs.StateCreating})
	if err == nil || !strings.Contains(string(out), "names no process") {
		t.Fatalf("hook without a process: %v: %s", err, out)
	}
}
