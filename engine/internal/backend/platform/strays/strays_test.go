package strays

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

// startLike runs sleep under the name of this test's executable (as a
// stray engine copy runs the engine's) with file open as its descriptor 3
// when file is set.
func startLike(t *testing.T, dir, name, file string) *exec.Cmd {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep")
	}
	data, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	if _, err := os.Stat(bin); err != nil {
		if err := os.WriteFile(bin, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "60")
	if file != "" {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd.ExtraFiles = []*os.File{f}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// TestReap: a single-threaded process running the engine's executable
// (by name) with a file under the root open is killed; one of another
// name, one holding nothing under the root, and one holding a file of
// another root are left alone.
func TestReap(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Base(self)
	dir, root, other := t.TempDir(), t.TempDir(), t.TempDir()
	for _, d := range []string{root, other} {
		if err := os.WriteFile(filepath.Join(d, "state.db"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	stray := startLike(t, dir, name, filepath.Join(root, "state.db"))
	otherName := startLike(t, t.TempDir(), "conmon", filepath.Join(root, "state.db"))
	nothingHeld := startLike(t, dir, name, "")
	otherRoot := startLike(t, dir, name, filepath.Join(other, "state.db"))
	// The processes exec sleep: wait until each runs it.
	time.Sleep(200 * time.Millisecond)

	killed, err := Reap(root)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(killed, []int{stray.Process.Pid}) {
		t.Fatalf("killed %v, want only the stray %d", killed, stray.Process.Pid)
	}
	if err := stray.Wait(); err == nil {
		t.Fatal("the stray exited by itself")
	}
	for _, c := range []*exec.Cmd{otherName, nothingHeld, otherRoot} {
		if _, err := os.Stat("/proc/" + itoa(c.Process.Pid)); err != nil {
			t.Errorf("process %d (%s) was killed", c.Process.Pid, c.Path)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
