package runtime

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"

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
//
// Where the host has nsenter and ip, the hook is a shell line running them
// (a few ms); else the engine's own executable, re-executed (its start
// alone takes 20 to 40 ms here, and more under load: every restore waits
// for it). The path is the engine's executable on disk (not /proc/PID/exe):
// a restore that goes on after the engine was killed still finds it.
func RestoreLoopbackHook() (specs.Hook, error) {
	timeout := 10
	if nsenter, ip, ok := loopbackTools(); ok {
		return specs.Hook{Path: "/bin/sh", Args: []string{"sh", "-c", loopbackScript(nsenter, ip)}, Timeout: &timeout}, nil
	}
	return reexecLoopbackHook(timeout)
}

// reexecLoopbackHook is the hook as the engine's executable.
func reexecLoopbackHook(timeout int) (specs.Hook, error) {
	exe, err := os.Executable()
	if err != nil {
		return specs.Hook{}, fmt.Errorf("the engine's executable, for the restore's loopback hook: %w", err)
	}
	return specs.Hook{Path: exe, Args: []string{loopbackHookName}, Timeout: &timeout}, nil
}

// loopbackTools finds /bin/sh, nsenter and ip (a hook runs without PATH:
// the script names them by their absolute paths).
func loopbackTools() (nsenter, ip string, ok bool) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		return "", "", false
	}
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return "", "", false
	}
	ip, err = exec.LookPath("ip")
	if err != nil {
		return "", "", false
	}
	if nsenter, err = filepath.Abs(nsenter); err != nil {
		return "", "", false
	}
	if ip, err = filepath.Abs(ip); err != nil {
		return "", "", false
	}
	return nsenter, ip, true
}

// loopbackScript is the hook's shell line: it takes the PID from the OCI
// state on stdin (runc writes it as one line of JSON; the PID is a number
// or the field is absent) and sets lo up in that process's network
// namespace.
func loopbackScript(nsenter, ip string) string {
	return `IFS= read -r s || [ -n "$s" ]; p=${s#*'"pid"':}; p=${p#"${p%%[! ]*}"}; p=${p%%[!0-9]*}; ` +
		`case $p in ''|0) echo "` + loopbackHookName + `: the container's state names no process" >&2; exit 1;; esac; ` +
		`exec ` + shellQuote(nsenter) + ` --net=/proc/$p/ns/net ` + shellQuote(ip) + ` link set lo up`
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
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
