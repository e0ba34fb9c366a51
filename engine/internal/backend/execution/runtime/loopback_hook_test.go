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

// TestRestoreLoopbackHook: run as runc runs a hook (the state on stdin,
// no environment), the restore's loopback hook sets lo up in the network
// namespace of the state's process, which a new namespace has down; a
// state without a process is refused. Both forms: the shell line with
// nsenter and ip (where the host has them) and the engine re-executed.
func TestRestoreLoopbackHook(t *testing.T) {
	requireTools(t)
	testdeadline.Set(t, time.Minute)
	shellHook, err := RestoreLoopbackHook()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := loopbackTools(); ok && shellHook.Path != "/bin/sh" {
		t.Fatalf("nsenter and ip are here, but the hook is %s", shellHook.Path)
	}
	reexecHook, err := reexecLoopbackHook(10)
	if err != nil {
		t.Fatal(err)
	}
	for name, hook := range map[string]specs.Hook{"default": shellHook, "reexec": reexecHook} {
		t.Run(name, func(t *testing.T) { testLoopbackHook(t, hook) })
	}
}

func testLoopbackHook(t *testing.T, hook specs.Hook) {
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
	run := func(state []byte) ([]byte, error) {
		cmd := &exec.Cmd{Path: hook.Path, Args: hook.Args, Env: []string{}, Stdin: bytes.NewReader(state)}
		return cmd.CombinedOutput()
	}
	for _, bad := range []string{
		`{"ociVersion":"1.0.2","id":"c","status":"creating"}`,
		`{"ociVersion":"1.0.2","id":"c","status":"creating","pid":0}`,
		`{"ociVersion":"1.0.2","id":"c","status":"creating","pid":"x"}`,
		``,
	} {
		if out, err := run([]byte(bad)); err == nil || !strings.Contains(string(out), loopbackHookName+": ") {
			t.Fatalf("hook with %q: %v: %s", bad, err, out)
		}
	}
	if loUp() {
		t.Fatal("lo came up from a state without a process")
	}
	// As runc writes it: annotations after the PID, which name "pid" too.
	state, _ := json.Marshal(specs.State{Version: specs.Version, ID: "c", Status: specs.StateCreating,
		Pid: sleeper.Process.Pid, Bundle: "/b", Annotations: map[string]string{"x": `"pid":1`}})
	if out, err := run(state); err != nil {
		t.Fatalf("hook: %v: %s", err, out)
	}
	if !loUp() {
		t.Fatal("lo is still down after the hook")
	}
}
