package runtime

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containers/storage/pkg/reexec"
)

// TestOwnCommand: the commands KillOrphans may kill are this runtime's, on
// this state root, and only those the engine waits for itself.
func TestOwnCommand(t *testing.T) {
	r := &Runtime{path: "/usr/sbin/runc", stateRoot: "/run/berth/runc"}
	tests := []struct {
		args []string
		own  bool
	}{
		{[]string{"/usr/sbin/runc", "--root", "/run/berth/runc", "pause", "abc"}, true},
		{[]string{"runc", "--root", "/run/berth/runc", "--criu", "/opt/criu", "checkpoint", "--image-path", "/x", "abc"}, true},
		{[]string{"runc", "--root", "/run/berth/runc", "--log-format", "json", "state", "abc"}, true},
		{[]string{"runc", "--root", "/run/berth/runc", "--log-format", "json", "exec", "--process", "/p", "abc"}, false},
		{[]string{"runc", "--root", "/run/other/runc", "pause", "abc"}, false},
		{[]string{"crun", "--root", "/run/berth/runc", "pause", "abc"}, false},
		{[]string{"runc", "init"}, false},
		{[]string{"runc", "--root", "/run/berth/runc"}, false},
	}
	for _, tt := range tests {
		if _, got := r.ownCommand(tt.args); got != tt.own {
			t.Errorf("%q: own %v, want %v", tt.args, got, tt.own)
		}
	}
}

// fakeRuntimeName is the test binary re-executed as a runtime command that
// hangs, with a child in its process group (as runc runs CRIU).
const fakeRuntimeName = "berth-fake-runtime"

func init() {
	reexec.Register(fakeRuntimeName, func() {
		child := exec.Command("sleep", "60")
		child.Start()
		time.Sleep(time.Minute)
	})
}

// TestKillOrphans: an orphaned command of this root goes, with the process
// group it leads; another root's command stays.
func TestKillOrphans(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r := &Runtime{path: filepath.Join(dir, fakeRuntimeName), stateRoot: filepath.Join(dir, "state")}
	start := func(root string) *exec.Cmd {
		cmd := &exec.Cmd{Path: self, Args: []string{fakeRuntimeName, "--root", root, "pause", "abc"}}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
		return cmd
	}
	ours, theirs := start(r.stateRoot), start(filepath.Join(dir, "other"))
	time.Sleep(200 * time.Millisecond)
	killed := r.KillOrphans()
	if len(killed) != 1 || !strings.Contains(killed[0], r.stateRoot+" pause abc") {
		t.Fatalf("killed %q, want the one command on %s", killed, r.stateRoot)
	}
	if err := ours.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("our orphan: %v", err)
	}
	// Its group went with it: the child it started is gone too.
	for deadline := time.Now().Add(2 * time.Second); syscall.Kill(-ours.Process.Pid, 0) == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the orphan's process group is still there")
		}
	}
	if err := theirs.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("another root's command was killed: %v", err)
	}
}
