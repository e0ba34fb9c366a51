package runtime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
)

// TestCheckpointTimeoutKillsRuntimeAndCRIU: a checkpoint whose runtime
// does not return (on Debian 13 runc's CRIU waited for ever for processes
// its denied SIGKILL never reached) ends at CheckpointTimeout with
// ErrCheckpointTimeout naming CRIU's last log line, and what the runtime
// started (CRIU, here a sleep standing in for it) is killed with it: a
// CRIU left behind would keep the container's processes under ptrace.
// The runtime is a script: this tests the deadline, not runc.
func TestCheckpointTimeoutKillsRuntimeAndCRIU(t *testing.T) {
	testdeadline.Set(t, time.Minute)
	dir := t.TempDir()
	child := filepath.Join(dir, "child.pid")
	fake := filepath.Join(dir, "fake-runc")
	script := "#!/bin/sh\n# the runtime's checkpoint: starts its \"CRIU\", logs, and waits for it\n" +
		"sleep 1000 &\necho $! > " + child + "\n" +
		"echo '(03.811293) \tUnseizing 490 into 2' > " + filepath.Join(dir, DumpLog) + "\nwait\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := New(Options{Name: "runc", Path: fake, ConmonPath: "/bin/true", RunRoot: filepath.Join(dir, "run")})
	if err != nil {
		t.Fatal(err)
	}
	saved := CheckpointTimeout
	CheckpointTimeout = 500 * time.Millisecond
	t.Cleanup(func() { CheckpointTimeout = saved })

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	err = r.Checkpoint(ctx, "ctr", dir, CheckpointOptions{})
	took := time.Since(start)
	if !errors.Is(err, ErrCheckpointTimeout) {
		t.Fatalf("Checkpoint of a runtime that does not return: %v, want ErrCheckpointTimeout", err)
	}
	if !strings.Contains(err.Error(), "Unseizing 490 into 2") {
		t.Errorf("the error does not quote CRIU's last log line: %v", err)
	}
	if took > 10*time.Second {
		t.Errorf("Checkpoint returned after %v, with a timeout of %v", took, CheckpointTimeout)
	}
	data, err := os.ReadFile(child)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	// The child is reaped by init once its parent is gone; until then it
	// may linger as a zombie, which is dead all the same.
	deadline := time.Now().Add(10 * time.Second)
	for {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || isZombie(string(stat)) {
			break
		}
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the runtime's child %d outlived the timeout: %s", pid, stat)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// isZombie tells whether a /proc/PID/stat line is a zombie's.
func isZombie(stat string) bool {
	i := strings.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}
