package devicesapi

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/testimage"
)

// makeRootfs lays out a root filesystem on the host: busybox as /bin/sh.
func (te *testEngine) makeRootfs() string {
	te.T.Helper()
	dir := filepath.Join(te.Dir, "rootfs")
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		te.T.Fatal(err)
	}
	data, err := os.ReadFile(testimage.BusyboxPath)
	if err != nil {
		te.T.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "busybox"), data, 0o755); err != nil {
		te.T.Fatal(err)
	}
	for _, name := range []string{"sh", "cat", "echo", "ls", "sleep"} {
		if err := os.Symlink("busybox", filepath.Join(dir, "bin", name)); err != nil {
			te.T.Fatal(err)
		}
	}
	return dir
}

// overlayMounts counts the overlays mounted on a directory of the test's,
// waiting up to 5 s for them to go (an exited container is released in
// the background).
func overlayMounts(t *testing.T, lower string) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		data, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			t.Fatal(err)
		}
		n := strings.Count(string(data), "lowerdir="+lower)
		if n == 0 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPodmanRunRootfs: --rootfs PATH runs a container whose root is the
// host directory (changes land there); PATH:O puts an overlay on it whose
// changes last one run and never reach PATH; inspect and ps show it as
// Podman does; exec works; commit and diff are refused; a path that does
// not exist or is not a directory is a 400 and creates nothing.
func TestPodmanRunRootfs(t *testing.T) {
	te := startEngine(t)
	rootfs := te.makeRootfs()

	out := te.mustPodman("run", "--rm", "--rootfs", rootfs+":O", "sh", "-c", "echo changed > /bin/new; ls /bin/new; cat /etc/hostname")
	if !strings.Contains(out, "/bin/new") {
		t.Fatalf("run --rootfs PATH:O:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(rootfs, "bin", "new")); err == nil {
		t.Fatal("a change in a PATH:O container reached PATH")
	}
	// A kept container starts from PATH again at each run.
	te.mustPodman("create", "--name", "ov", "--rootfs", rootfs+":O", "sh", "-c", "cat /x 2>/dev/null || echo fresh; echo kept > /x")
	for i := 0; i < 2; i++ {
		if out := te.mustPodman("start", "-a", "ov"); strings.TrimSpace(out) != "fresh" {
			t.Fatalf("run %d of a PATH:O container saw the last run's change:\n%s", i, out)
		}
	}
	if n := overlayMounts(t, rootfs); n != 0 {
		t.Errorf("%d overlays on %s remain after the container exited", n, rootfs)
	}
	te.mustPodman("rm", "ov")

	te.mustPodman("run", "--name", "plain", "--rootfs", rootfs, "sh", "-c", "echo written > /plain.txt")
	if data, err := os.ReadFile(filepath.Join(rootfs, "plain.txt")); err != nil || string(data) != "written\n" {
		t.Errorf("run --rootfs PATH: the container's write is not in PATH: %v %q", err, data)
	}
	if out := te.mustPodman("inspect", "plain", "--format", "{{.Rootfs}}|{{.ImageName}}|{{.Image}}"); strings.TrimSpace(out) != rootfs+"||" {
		t.Errorf("inspect of a --rootfs container: %s", out)
	}
	if out := te.mustPodman("ps", "-a", "--filter", "name=plain", "--format", "{{.Names}}|{{.Image}}|{{.Status}}"); !strings.HasPrefix(out, "plain||Exited (0)") {
		t.Errorf("ps of a --rootfs container: %s", out)
	}
	for _, args := range [][]string{{"commit", "plain", "localhost/fromrootfs"}, {"diff", "plain"}} {
		if out, err := te.podman(args...); err == nil || !strings.Contains(out, "--rootfs") {
			t.Errorf("podman %s: err %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	te.mustPodman("run", "-d", "--name", "live", "--rootfs", rootfs+":O", "sleep", "60")
	if out := te.mustPodman("exec", "live", "sh", "-c", "echo in > /in; cat /in"); strings.TrimSpace(out) != "in" {
		t.Errorf("exec in a PATH:O container: %s", out)
	}
	te.mustPodman("rm", "-f", "-t", "0", "live")
	if n := overlayMounts(t, rootfs); n != 0 {
		t.Errorf("%d overlays on %s remain after rm -f", n, rootfs)
	}

	before := te.ContainerCount()
	file := filepath.Join(rootfs, "plain.txt")
	for _, tc := range []struct{ rootfs, want string }{
		{filepath.Join(te.Dir, "nope"), "invalid rootfs: " + filepath.Join(te.Dir, "nope") + " does not exist"},
		{file, "invalid rootfs: " + file + " is not a directory"},
		{file + ":O", "invalid rootfs: " + file + " is not a directory"},
	} {
		if out, err := te.podman("run", "--rm", "--rootfs", tc.rootfs, "true"); err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("run --rootfs %s: err %v, want %q:\n%s", tc.rootfs, err, tc.want, out)
		}
	}
	for _, spec := range []map[string]any{
		{"image": "localhost/busybox", "rootfs": rootfs, "command": []string{"true"}},
		{"rootfs": "/", "command": []string{"true"}},
		{"rootfs": "relative/dir", "command": []string{"true"}},
		{"image": "localhost/busybox", "rootfs_overlay": true, "command": []string{"true"}},
	} {
		status, message, body := te.create(spec)
		if status != http.StatusBadRequest || !strings.HasPrefix(message, "invalid rootfs") {
			t.Errorf("create %v: %d %s, want a 400 about the rootfs", spec, status, body)
		}
	}
	if n := te.ContainerCount(); n != before {
		t.Errorf("refused creates left containers: %d, had %d", n, before)
	}
}
