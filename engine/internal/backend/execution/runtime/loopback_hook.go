package runtime

import (
	"encoding/json"
	"fmt"
	"os"
	goruntime "runtime"

	"github.com/containers/storage/pkg/reexec"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// loopbackHookName is the name under which the engine's own executable
// runs as the OCI hook of RestoreLoopbackHook (re-executed, as the
// helpers of containers/storage are: its main calls reexec.Init first).
const loopbackHookName = "berth-restore-loopback-up"

func init() { reexec.Register(loopbackHookName, loopbackHookMain) }

// RestoreLoopbackHook is a createRuntime hook that brings up the loopback
// of the container's network namespace, for a restore into a namespace the
// runtime creates. runc checkpoints such a namespace as an empty one (it
// always passes CRIU --empty-ns net: "runc doesn't manage network devices")
// and on restore CRIU makes a fresh namespace whose loopback is down, where
// at a start runc's own init would have brought it up. A connection over
// 127.0.0.1 then cannot come back: CRIU's "Can't connect inet socket back:
// Network is unreachable". runc runs the hook when CRIU reports its
// namespaces set up (the setup-namespaces notification), before CRIU
// restores the sockets, with the restored init's PID in the state on stdin.
// The path is the engine's executable on disk (not /proc/PID/exe): a
// restore that goes on after the engine was killed still finds it.
func RestoreLoopbackHook() (specs.Hook, error) {
	exe, err := os.Executable()
	if err != nil {
		return specs.Hook{}, fmt.Errorf("the engine's executable, for the restore's loopback hook: %w", err)
	}
	timeout := 10
	return specs.Hook{Path: exe, Args: []string{loopbackHookName}, Timeout: &timeout}, nil
}

// loopbackHookMain is the hook: it reads the OCI state from stdin, joins
// the network namespace of its process and sets lo up.
func loopbackHookMain() {
	if err := loopbackUpFromState(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", loopbackHookName, err)
		os.Exit(1)
	}
}

func loopbackUpFromState() error {
	var st specs.State
	if err := json.NewDecoder(os.Stdin).Decode(&st); err != nil {
		return fmt.Errorf("reading the container's state: %w", err)
	}
	if st.Pid <= 0 {
		return fmt.Errorf("the container's state names no process (pid %d)", st.Pid)
	}
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", st.Pid))
	if err != nil {
		return err
	}
	defer ns.Close()
	// The thread joins the namespace and is never unlocked: the process
	// ends with it.
	goruntime.LockOSThread()
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("joining the network namespace of process %d: %w", st.Pid, err)
	}
	return loopbackUp()
}
