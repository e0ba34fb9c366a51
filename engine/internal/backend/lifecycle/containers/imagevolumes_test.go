package containers_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/testimage"
)

// TestImageVolumes: image_volumes (podman's --mount type=image) mount an
// image's files at a destination: read-only, or with ReadWrite writable
// for one run; a subPath mounts one directory of it. Inspect lists them as
// image mounts; the image is in use while a container mounts it. Bad
// requests are 400s naming the entry. The engine is killed with SIGKILL and
// the container exits while no engine runs: after the restart its image
// mount is gone, and removal leaves nothing.
func TestImageVolumes(t *testing.T) {
	p, te := startEngineProcess(t)
	te.loadBusybox()
	te.Load(testimage.Image{RepoTags: []string{"localhost/volimg:1"}, Layers: []testimage.Layer{
		{Files: []testimage.File{{Path: "data/one.txt", Data: []byte("first layer\n")}}},
		{Files: []testimage.File{{Path: "data/two.txt", Data: []byte("second layer\n")}}},
	}})
	vol := func(extra map[string]any) []map[string]any {
		v := map[string]any{"Source": "localhost/volimg:1", "Destination": "/img"}
		for k, val := range extra {
			v[k] = val
		}
		return []map[string]any{v}
	}
	code, lines := te.run(map[string]any{"image_volumes": vol(nil),
		"command": []string{"sh", "-c", "cat /img/data/one.txt /img/data/two.txt; touch /img/x 2>/dev/null || echo read-only"}})
	if code != 0 || strings.Join(lines, "|") != "first layer|second layer|read-only" {
		t.Errorf("a read-only image volume: exit %d, %q", code, lines)
	}
	code, lines = te.run(map[string]any{"image_volumes": vol(map[string]any{"ReadWrite": true, "subPath": "data"}),
		"command": []string{"sh", "-c", "echo changed > /img/one.txt && cat /img/one.txt"}})
	if code != 0 || strings.Join(lines, "|") != "changed" {
		t.Errorf("a writable image volume of data/: exit %d, %q", code, lines)
	}
	// The change lasted one run: the image is as it was.
	code, lines = te.run(map[string]any{"image_volumes": vol(nil), "command": []string{"cat", "/img/data/one.txt"}})
	if code != 0 || strings.Join(lines, "|") != "first layer" {
		t.Errorf("after a writable run: %d %q", code, lines)
	}

	live := te.create(map[string]any{"name": "live", "image_volumes": vol(nil), "command": []string{"sleep", "600"}})
	te.Must(http.StatusNoContent, "POST", "/containers/live/start", nil)
	var c struct {
		Mounts []struct {
			Type, Source, Destination string
			RW                        bool
		}
	}
	if err := json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/live/json", nil), &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Mounts) != 1 || c.Mounts[0].Type != "image" || c.Mounts[0].Destination != "/img" || c.Mounts[0].RW || len(c.Mounts[0].Source) != 64 {
		t.Errorf("inspect Mounts: %+v", c.Mounts)
	}
	if status, body := te.Do("DELETE", "/images/localhost/volimg:1", nil); status != http.StatusConflict {
		t.Errorf("removing an image a container mounts: %d %s", status, body)
	}
	for _, bad := range []struct {
		v    []map[string]any
		want string
	}{
		{vol(map[string]any{"Source": "nosuch"}), "image_volumes[0]"},
		{vol(map[string]any{"Destination": "relative"}), "image_volumes[0]"},
		{vol(map[string]any{"subPath": "../etc"}), "image_volumes[0]"},
		{append(vol(nil), vol(nil)...), "image_volumes[1]"},
	} {
		if status, body := te.Do("POST", "/containers/create", map[string]any{"image": "busybox", "name": "refused-iv", "image_volumes": bad.v}); status != http.StatusBadRequest || !strings.Contains(string(body), bad.want) {
			t.Errorf("create %v: %d %s, want a 400 naming %s", bad.v, status, body, bad.want)
		}
	}

	imgMounts := func() int {
		return mountsWhere(func(p string) bool { return strings.Contains(p, live+"/userdata/imgvol/") })
	}
	if n := imgMounts(); n != 1 {
		t.Fatalf("%d image volume mounts of the running container, want 1", n)
	}
	te.exitWhileDown(p, live, "the exited container's image volume unmounted after the restart", imgMounts)
	te.Must(http.StatusNoContent, "POST", "/containers/live/start", nil)
	if n := imgMounts(); n != 1 {
		t.Errorf("%d image volume mounts after a new start, want 1", n)
	}
	te.Must(http.StatusOK, "DELETE", "/containers/live?force=true&timeout=0", nil)
	if l := leaks(p.Root, p.RunRoot, live); len(l) > 0 || imgMounts() != 0 {
		t.Fatalf("leaked after removal (%d image mounts):\n%s", imgMounts(), strings.Join(l, "\n"))
	}
	te.Must(http.StatusOK, "DELETE", "/images/localhost/volimg:1", nil)
}
