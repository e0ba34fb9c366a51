package containers_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/testimage"
)

// overlaysOn counts the overlays whose lower directory is lower.
func overlaysOn(t *testing.T, lower string) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), "lowerdir="+lower+",")
}

// TestRootfsOverlayRestartSafety: the engine is killed with SIGKILL while
// two --rootfs PATH:O containers run; one exits while no engine runs. After
// the restart the exited one's overlay is gone and the running one keeps
// its own; removing it leaves no overlay, and PATH never saw a change.
func TestRootfsOverlayRestartSafety(t *testing.T) {
	p, te := startEngineProcess(t)
	rootfs := filepath.Join(t.TempDir(), "rootfs")
	os.MkdirAll(filepath.Join(rootfs, "bin"), 0o755)
	data, err := os.ReadFile(testimage.BusyboxPath)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(rootfs, "bin", "busybox"), data, 0o755)
	os.Symlink("busybox", filepath.Join(rootfs, "bin", "sh"))

	spec := func(name, script string) map[string]any {
		return map[string]any{"name": name, "image": "", "rootfs": rootfs, "rootfs_overlay": true, "command": []string{"/bin/sh", "-c", script}}
	}
	live := te.create(spec("live", "echo live > /live; exec /bin/busybox sleep 60"))
	quitter := te.create(spec("quitter", "echo q > /quit; /bin/busybox sleep 1.5; exit 4"))
	for _, id := range []string{live, quitter} {
		te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	}
	if n := overlaysOn(t, rootfs); n != 2 {
		t.Fatalf("%d overlays on the rootfs while both run, want 2", n)
	}
	p.Kill9()
	time.Sleep(2500 * time.Millisecond)
	p.Start()

	if d := te.inspect(quitter); d.State.Status != "exited" || d.State.ExitCode != 4 {
		t.Fatalf("quitter after restart: %+v", d.State)
	}
	deadline := time.Now().Add(5 * time.Second)
	for overlaysOn(t, rootfs) != 1 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := overlaysOn(t, rootfs); n != 1 {
		t.Fatalf("%d overlays on the rootfs after the restart, want the running container's only", n)
	}
	if d := te.inspect(live); d.State.Status != "running" {
		t.Fatalf("live after restart: %+v", d.State)
	}
	for _, id := range []string{live, quitter} {
		te.Must(http.StatusOK, "DELETE", "/containers/"+id+"?force=true&timeout=0", nil)
	}
	if n := overlaysOn(t, rootfs); n != 0 {
		t.Fatalf("%d overlays on the rootfs after removal", n)
	}
	for _, f := range []string{"live", "quit"} {
		if _, err := os.Stat(filepath.Join(rootfs, f)); err == nil {
			t.Errorf("a container's /%s reached the rootfs", f)
		}
	}
	if l := leaks(p.Root, p.RunRoot, live, quitter); len(l) > 0 {
		t.Fatalf("leaked after removal:\n%s", strings.Join(l, "\n"))
	}
}
