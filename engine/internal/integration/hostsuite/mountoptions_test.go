package hostsuite

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestMountOptionsOnTheHost: what depends on the kernel's mounts, on
// Debian's kernel with systemd as PID 1: a volume's part staged by handle
// and bound (a link in the volume leads nowhere outside), an overlay whose
// writes never reach its source, and U under --userns=auto handing the
// source to the namespace's root; no staging mount or overlay is left once
// the containers are gone.
func TestMountOptionsOnTheHost(t *testing.T) {
	l := startLab(t)
	run := func(spec map[string]any) (int, string) {
		t.Helper()
		id := l.Run(spec)
		code := l.Wait(id)
		out := l.Logs(id)
		l.Must(http.StatusOK, "DELETE", "/containers/"+id+"?force=true", nil)
		return code, out
	}
	vol := []map[string]any{{"Name": "lab-parts", "Dest": "/v"}}
	if code, out := run(map[string]any{"volumes": vol, "command": []string{"sh", "-c", "mkdir -p /v/sub && echo part > /v/sub/f && ln -s /etc /v/out"}}); code != 0 {
		t.Fatalf("filling the volume: %d %s", code, out)
	}
	part := []map[string]any{{"Name": "lab-parts", "Dest": "/d", "SubPath": "sub"}}
	if code, out := run(map[string]any{"volumes": part, "command": []string{"cat", "/d/f"}}); code != 0 || strings.TrimSpace(out) != "part" {
		t.Errorf("a volume's part: %d %q", code, out)
	}
	id := l.Create(map[string]any{"volumes": []map[string]any{{"Name": "lab-parts", "Dest": "/d", "SubPath": "out"}}, "command": []string{"ls", "/d"}})
	if status, body := l.Do("POST", "/containers/"+id+"/start", nil); status != http.StatusBadRequest {
		t.Errorf("a part through a link to /etc: %d %s", status, body)
	}
	l.Must(http.StatusOK, "DELETE", "/containers/"+id, nil)

	src := t.TempDir()
	for dir := src; dir != "/" && dir != os.TempDir(); dir = filepath.Dir(dir) {
		os.Chmod(dir, 0o755)
	}
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("orig\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	overlay := []map[string]any{{"source": src, "destination": "/o", "options": []string{"O"}}}
	if code, out := run(map[string]any{"overlay_volumes": overlay, "command": []string{"sh", "-c", "echo changed > /o/f; cat /o/f"}}); code != 0 || strings.TrimSpace(out) != "changed" {
		t.Errorf("through an overlay: %d %q", code, out)
	}
	if data, _ := os.ReadFile(filepath.Join(src, "f")); string(data) != "orig\n" {
		t.Errorf("the overlay's source after a write: %q", data)
	}

	// A user namespace needs the storage's directories searchable.
	os.Chmod(filepath.Dir(l.Root), 0o711)
	owned := t.TempDir()
	os.Chmod(owned, 0o755)
	bind := []map[string]any{{"type": "bind", "source": owned, "destination": "/u", "options": []string{"rbind", "U"}}}
	if code, out := run(map[string]any{"mounts": bind, "userns": map[string]string{"nsmode": "auto"}, "command": []string{"touch", "/u/made"}}); code != 0 {
		t.Errorf("root of --userns=auto writing to a U mount: %d %s", code, out)
	}
	fi, err := os.Stat(owned)
	if err != nil || fi.Sys().(*syscall.Stat_t).Uid == 0 {
		t.Errorf("a U mount under --userns=auto still belongs to the host's root: %v", err)
	}
	data, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(data), "/volsub/") || strings.Contains(string(data), "/ovl/") {
		t.Errorf("staging mounts or overlays left:\n%s", data)
	}
}
