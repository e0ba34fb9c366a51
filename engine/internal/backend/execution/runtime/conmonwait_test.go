package runtime

import (
	"os/exec"
	"testing"
	"time"
)

// fakeConmon starts a process whose argv[0] is "conmon" and whose arguments
// are "sleep"'s: bash's exec -a names it.
func fakeConmon(t *testing.T, seconds string) *exec.Cmd {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal("bash is needed to name a process")
	}
	cmd := exec.Command("bash", "-c", "exec -a /usr/bin/conmon sleep "+seconds)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	// Until bash has exec'd, the process is not named conmon yet.
	for deadline := time.Now().Add(10 * time.Second); !isConmonOf(cmd.Process.Pid, seconds); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the fake conmon never showed up")
		}
	}
	return cmd
}

func TestWaitConmonExit(t *testing.T) {
	// A conmon that exits on its own is waited for.
	cmd := fakeConmon(t, "0.5")
	reaped := make(chan struct{})
	go func() { cmd.Wait(); close(reaped) }()
	start := time.Now()
	if !WaitConmonExit(cmd.Process.Pid, "0.5", 30*time.Second) {
		t.Fatal("a conmon that exited counted as killed")
	}
	if el := time.Since(start); el < 100*time.Millisecond || el > 20*time.Second {
		t.Fatalf("waited %v for a conmon that runs 0.5 s", el)
	}
	<-reaped

	// One that does not exit is killed at the deadline.
	cmd = fakeConmon(t, "600")
	if WaitConmonExit(cmd.Process.Pid, "600", 200*time.Millisecond) {
		t.Fatal("a conmon still running at the deadline counted as exited")
	}
	if err := cmd.Wait(); err == nil {
		t.Fatal("the overdue conmon was not killed")
	}

	// A pid that is not that container's conmon is left alone.
	other := fakeConmon(t, "600")
	if !WaitConmonExit(other.Process.Pid, "another-container", time.Minute) {
		t.Fatal("another container's conmon counted as killed")
	}
	if !ProcessAlive(other.Process.Pid) {
		t.Fatal("another container's conmon was killed")
	}
	if !WaitConmonExit(0, "x", time.Minute) || !WaitConmonExit(1<<30, "x", time.Minute) {
		t.Fatal("no process counted as not exited")
	}
}
