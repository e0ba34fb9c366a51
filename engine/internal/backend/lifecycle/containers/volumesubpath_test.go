package containers_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/poll"
)

// TestVolumeSubPath: a named volume's SubPath (Podman 5's --mount
// type=volume,...,subpath=, Docker's VolumeOptions.Subpath) mounts only that
// directory or file of the volume, writable into it. Links in the volume
// resolve inside it, never to the host's files. Inspect names the subpath.
// A subpath the volume lacks is a 400 at start, one that leads out or goes
// with an anonymous volume a 400 at create. The staging mount is gone once
// the container runs; one a kill -9 left is detached by the next start and
// by removal, and removal never deletes the volume's files through it.
func TestVolumeSubPath(t *testing.T) {
	p, te := startEngineProcess(t)
	te.loadBusybox()
	whole := []map[string]any{{"Name": "subvol", "Dest": "/v"}}
	sub := func(s string) []map[string]any {
		return []map[string]any{{"Name": "subvol", "Dest": "/d", "SubPath": s}}
	}
	code, lines := te.run(map[string]any{"volumes": whole, "command": []string{"sh", "-c",
		"mkdir -p /v/sub /v/etc && echo inner > /v/sub/f && echo whole > /v/top && echo volume-etc > /v/etc/hostname && " +
			"ln -s /etc /v/abs && ln -s ../../../../../../../../etc /v/rel && ln -s /etc/hostname /v/hostlink"}})
	if code != 0 {
		t.Fatalf("filling the volume: exit %d %q", code, lines)
	}
	for _, c := range []struct{ sub, cmd, want string }{
		{"sub", "ls /d; cat /d/f; echo more > /d/g", "f|inner"},
		{"/sub", "cat /d/g", "more"},
		{"top", "cat /d", "whole"},
		{"abs", "cat /d/hostname", "volume-etc"},
		{"rel", "cat /d/hostname", "volume-etc"},
		{"hostlink", "cat /d", "volume-etc"},
		{"sub/../etc", "cat /d/hostname", "volume-etc"},
	} {
		code, lines := te.run(map[string]any{"volumes": sub(c.sub), "command": []string{"sh", "-c", c.cmd}})
		if code != 0 || strings.Join(lines, "|") != c.want {
			t.Errorf("subpath %q, %s: exit %d %q, want %q", c.sub, c.cmd, code, lines, c.want)
		}
	}
	if code, lines := te.run(map[string]any{"volumes": whole, "command": []string{"cat", "/v/sub/g"}}); code != 0 || strings.Join(lines, "|") != "more" {
		t.Errorf("a write through the subpath is not in the volume: exit %d %q", code, lines)
	}

	missing := te.create(map[string]any{"volumes": sub("nosuch/dir"), "command": []string{"true"}})
	if status, body := te.Do("POST", "/containers/"+missing+"/start", nil); status != http.StatusBadRequest || !strings.Contains(string(body), "nosuch/dir") {
		t.Errorf("a subpath the volume lacks: %d %s, want a 400 naming it", status, body)
	}
	te.Must(http.StatusOK, "DELETE", "/containers/"+missing, nil)
	for _, bad := range []map[string]any{
		{"Name": "subvol", "Dest": "/d", "SubPath": "../subvol2"},
		{"Name": "subvol", "Dest": "/d", "SubPath": "sub/../../x"},
		{"Name": "", "Dest": "/d", "SubPath": "sub"},
	} {
		status, body := te.Do("POST", "/containers/create", map[string]any{"image": "busybox", "volumes": []map[string]any{bad}})
		if status != http.StatusBadRequest || !strings.Contains(string(body), "volumes[0].SubPath") {
			t.Errorf("create with %v: %d %s, want a 400 naming volumes[0].SubPath", bad, status, body)
		}
	}

	// A bind mount's subpath= (kube play's hostPath subPath): opened inside
	// the host directory the same way; a link in it leads nowhere outside.
	hostDir := t.TempDir()
	os.MkdirAll(filepath.Join(hostDir, "part"), 0o755)
	os.WriteFile(filepath.Join(hostDir, "part", "f"), []byte("host part\n"), 0o644)
	os.Symlink("/etc", filepath.Join(hostDir, "out"))
	bindSub := func(sub string) []map[string]any {
		return []map[string]any{{"type": "bind", "source": hostDir, "destination": "/b", "options": []string{"rbind", "subpath=" + sub}}}
	}
	if code, lines := te.run(map[string]any{"mounts": bindSub("part"), "command": []string{"cat", "/b/f"}}); code != 0 || strings.Join(lines, "|") != "host part" {
		t.Errorf("a bind mount's subpath: exit %d %q", code, lines)
	}
	outward := te.create(map[string]any{"mounts": bindSub("out"), "command": []string{"ls", "/b"}})
	if status, body := te.Do("POST", "/containers/"+outward+"/start", nil); status != http.StatusBadRequest || !strings.Contains(string(body), "has no out") {
		t.Errorf("a bind subpath through a link to /etc: %d %s", status, body)
	}
	te.Must(http.StatusOK, "DELETE", "/containers/"+outward, nil)
	if status, body := te.Do("POST", "/containers/create", map[string]any{"image": "busybox", "mounts": bindSub("../x")}); status != http.StatusBadRequest || !strings.Contains(string(body), "mounts[0].options") {
		t.Errorf("a bind subpath that leads out: %d %s", status, body)
	}

	live := te.create(map[string]any{"name": "subpath-live", "volumes": sub("sub"), "command": []string{"sleep", "600"}})
	in := enginetest.Fetch[struct {
		StaticDir string
		Mounts    []struct{ Type, Name, Source, Destination, SubPath string }
	}](te.Engine, "/containers/"+live+"/json")
	stage := filepath.Join(in.StaticDir, "volsub", "0")
	staged := func() int {
		return mountsWhere(func(mp string) bool { return strings.HasPrefix(mp, filepath.Join(in.StaticDir, "volsub")) })
	}
	if len(in.Mounts) != 1 || in.Mounts[0].Type != "volume" || in.Mounts[0].Name != "subvol" || in.Mounts[0].SubPath != "sub" || filepath.Base(in.Mounts[0].Source) != "_data" {
		t.Errorf("inspect Mounts: %+v", in.Mounts)
	}
	// What a kill -9 between the staging and the runtime's create leaves:
	// a bind at the staging place. The start detaches it first.
	leftover := func() {
		t.Helper()
		if err := os.MkdirAll(stage, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount(filepath.Join(p.Root, "volumes"), stage, "", unix.MS_BIND, ""); err != nil {
			t.Fatal(err)
		}
	}
	leftover()
	te.Must(http.StatusNoContent, "POST", "/containers/"+live+"/start", nil)
	if n := staged(); n != 0 {
		t.Errorf("%d staging mounts while the container runs, want 0", n)
	}
	if out, err := te.Podman("exec", live, "cat", "/d/f"); err != nil || strings.TrimSpace(out) != "inner" {
		t.Errorf("the running container's subpath: %v %q", err, out)
	}
	te.exitWhileDown(p, live, "the container's exit recorded after the restart", nil)
	te.Must(http.StatusNoContent, "POST", "/containers/"+live+"/start", nil)
	te.Must(http.StatusNoContent, "POST", "/containers/"+live+"/stop?timeout=0", nil)
	leftover()
	te.Must(http.StatusOK, "DELETE", "/containers/"+live+"?force=true&timeout=0", nil)
	// The directories go in the background after the removal's answer.
	poll.Until(t, 10*time.Second, "the container's directory and staging mounts gone after removal", func() bool {
		_, err := os.Stat(in.StaticDir)
		return os.IsNotExist(err) && staged() == 0
	})
	if l := leaks(p.Root, p.RunRoot, live); len(l) > 0 {
		t.Fatalf("leaked after removal:\n%s", strings.Join(l, "\n"))
	}
	// The volume's files are all there: nothing was deleted through a mount.
	if code, lines := te.run(map[string]any{"volumes": whole, "command": []string{"sh", "-c", "cat /v/sub/f /v/top /v/etc/hostname"}}); code != 0 || strings.Join(lines, "|") != "inner|whole|volume-etc" {
		t.Errorf("the volume after the removal: exit %d %q", code, lines)
	}
}
