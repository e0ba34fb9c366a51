package containers_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOverlayVolumes: the O option (podman run -v SRC:DST:O, sent as
// overlay_volumes for a host directory and as a volume's option) shows the
// container SRC through an overlay: it reads SRC's files, and what it
// writes never reaches SRC and is gone at its next run; with upperdir and
// workdir the changes land there instead; root of a user namespace writes
// too. Bad option combinations are 400s naming the entry. After a kill -9
// of the engine the exited container's overlay is detached, and removal
// leaves no mount and the source as it was.
func TestOverlayVolumes(t *testing.T) {
	p, te := startEngineProcess(t)
	te.loadBusybox()
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("orig\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	overlay := func(opts ...string) []map[string]any {
		return []map[string]any{{"source": src, "destination": "/d", "options": append([]string{"O"}, opts...)}}
	}
	code, lines := te.run(map[string]any{"overlay_volumes": overlay(), "command": []string{"sh", "-c", "cat /d/f; echo changed > /d/f; echo new > /d/g; cat /d/f /d/g"}})
	if code != 0 || strings.Join(lines, "|") != "orig|changed|new" {
		t.Errorf("through the overlay: exit %d %q", code, lines)
	}
	if data, _ := os.ReadFile(filepath.Join(src, "f")); string(data) != "orig\n" {
		t.Errorf("the source after the container wrote: %q", data)
	}
	if _, err := os.Stat(filepath.Join(src, "g")); !os.IsNotExist(err) {
		t.Errorf("a file the container made reached the source: %v", err)
	}
	upper, work := t.TempDir(), t.TempDir()
	if code, lines := te.run(map[string]any{"overlay_volumes": overlay("upperdir="+upper, "workdir="+work), "command": []string{"sh", "-c", "echo kept > /d/k"}}); code != 0 {
		t.Errorf("with upperdir and workdir: exit %d %q", code, lines)
	}
	if data, _ := os.ReadFile(filepath.Join(upper, "k")); string(data) != "kept\n" {
		t.Errorf("the client's upper layer: %q", data)
	}
	vol := []map[string]any{{"Name": "ovl-vol", "Dest": "/v", "Options": []string{"O"}}}
	if code, lines := te.run(map[string]any{"volumes": vol, "command": []string{"sh", "-c", "echo x > /v/x && cat /v/x"}}); code != 0 || strings.Join(lines, "|") != "x" {
		t.Errorf("a volume through an overlay: exit %d %q", code, lines)
	}
	if code, lines := te.run(map[string]any{"volumes": []map[string]any{{"Name": "ovl-vol", "Dest": "/v"}}, "command": []string{"ls", "/v"}}); code != 0 || len(lines) != 0 {
		t.Errorf("the volume after an overlay run: exit %d %q", code, lines)
	}
	// A user namespace needs every directory above the storage searchable.
	for dir := filepath.Dir(p.Root); dir != os.TempDir() && dir != "/"; dir = filepath.Dir(dir) {
		os.Chmod(dir, 0o755)
	}
	if code, lines := te.run(map[string]any{"overlay_volumes": overlay(), "userns": map[string]any{"nsmode": "auto"}, "command": []string{"sh", "-c", "echo u > /d/u && cat /d/u"}}); code != 0 || strings.Join(lines, "|") != "u" {
		t.Errorf("root of a user namespace writing to the overlay: exit %d %q", code, lines)
	}

	for _, c := range []struct {
		field string
		body  map[string]any
	}{
		{"mounts[0].options", map[string]any{"overlay_volumes": overlay("ro")}},
		{"mounts[0].options", map[string]any{"overlay_volumes": overlay("upperdir=" + upper)}},
		{"mounts[0].options", map[string]any{"overlay_volumes": overlay("upperdir=rel", "workdir=rel2")}},
		{"overlay_volumes[0].source", map[string]any{"overlay_volumes": []map[string]any{{"source": "rel", "destination": "/d", "options": []string{"O"}}}}},
		{"mounts[0].options", map[string]any{"mounts": []map[string]any{{"type": "tmpfs", "destination": "/t", "options": []string{"O"}}}}},
		{"volumes[0].Options", map[string]any{"volumes": []map[string]any{{"Name": "x", "Dest": "/x", "Options": []string{"O", "U"}}}}},
	} {
		c.body["image"] = "busybox"
		status, out := te.Do("POST", "/containers/create", c.body)
		if status != http.StatusBadRequest || !strings.Contains(string(out), c.field) {
			t.Errorf("create %v: %d %s, want a 400 naming %s", c.body, status, out, c.field)
		}
	}

	live := te.create(map[string]any{"name": "ovl-live", "overlay_volumes": overlay(), "command": []string{"sh", "-c", "echo live > /d/live; sleep 600"}})
	te.Must(http.StatusNoContent, "POST", "/containers/"+live+"/start", nil)
	overlays := func() int {
		return mountsWhere(func(mp string) bool { return strings.Contains(mp, live+"/userdata/ovl/") })
	}
	if n := overlays(); n != 1 {
		t.Fatalf("%d overlay mounts of the running container, want 1", n)
	}
	te.exitWhileDown(p, live, "the exited container's overlay detached after the restart", overlays)
	te.Must(http.StatusOK, "DELETE", "/containers/"+live+"?force=true", nil)
	if l := leaks(p.Root, p.RunRoot, live); len(l) > 0 || overlays() != 0 {
		t.Fatalf("leaked after removal (%d overlays):\n%s", overlays(), strings.Join(l, "\n"))
	}
	if entries, _ := os.ReadDir(src); len(entries) != 1 {
		t.Errorf("the source after every run: %v", entries)
	}
}
