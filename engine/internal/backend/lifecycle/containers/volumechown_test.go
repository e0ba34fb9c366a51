package containers_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestOwnershipOption: a bind mount or volume with the U option (podman
// run -v SRC:DST:U) becomes the container user's, recursively, before the
// container starts, so that user can write to it, and a tmpfs with U is
// mounted as that user's; a host path that must never be given away is a
// 400 naming the mount. U was ignored before (refused on a tmpfs).
func TestOwnershipOption(t *testing.T) {
	te := startEngine(t)
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "sub", "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	owner := func(path string) (uint32, uint32) {
		fi, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		return st.Uid, st.Gid
	}
	bind := []map[string]any{{"type": "bind", "source": src, "destination": "/d", "options": []string{"rbind", "U"}}}
	code, lines := te.run(map[string]any{"mounts": bind, "user": "1000:1001", "command": []string{"sh", "-c", "touch /d/made && echo wrote"}})
	if code != 0 || strings.Join(lines, "|") != "wrote" {
		t.Errorf("the container user writing to its U mount: exit %d %q", code, lines)
	}
	for _, p := range []string{src, filepath.Join(src, "sub"), filepath.Join(src, "sub", "f"), filepath.Join(src, "made")} {
		if uid, gid := owner(p); uid != 1000 || gid != 1001 {
			t.Errorf("%s is %d:%d, want 1000:1001", p, uid, gid)
		}
	}
	vol := []map[string]any{{"Name": "owned-vol", "Dest": "/v", "Options": []string{"U"}}}
	if code, lines := te.run(map[string]any{"volumes": vol, "user": "1234", "command": []string{"sh", "-c", "touch /v/x && stat -c %u /v"}}); code != 0 || strings.Join(lines, "|") != "1234" {
		t.Errorf("a volume with U: exit %d %q", code, lines)
	}
	// On a tmpfs, U makes the container's user its owner (uid=, gid=).
	tmpfs := []map[string]any{{"type": "tmpfs", "source": "tmpfs", "destination": "/t", "options": []string{"U"}}}
	if code, lines := te.run(map[string]any{"mounts": tmpfs, "user": "1000:1001", "command": []string{"stat", "-c", "%u:%g", "/t"}}); code != 0 || strings.Join(lines, "|") != "1000:1001" {
		t.Errorf("a tmpfs with U: exit %d %q", code, lines)
	}
	id := te.create(map[string]any{"mounts": []map[string]any{{"type": "bind", "source": "/etc", "destination": "/d", "options": []string{"rbind", "U"}}}, "user": "1000", "command": []string{"true"}})
	if status, body := te.Do("POST", "/containers/"+id+"/start", nil); status != http.StatusBadRequest || !strings.Contains(string(body), "mounts[0]") || !strings.Contains(string(body), "/etc") {
		t.Errorf("U on /etc: %d %s", status, body)
	}
	if uid, _ := owner("/etc"); uid != 0 {
		t.Fatalf("/etc is owned by %d now", uid)
	}
}
