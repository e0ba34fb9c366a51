package containers_test

import (
	"archive/tar"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containers/storage"

	"github.com/berth-project/berth/engine/internal/testsupport/poll"
	"github.com/berth-project/berth/engine/internal/testsupport/tartest"
)

// TestKill9DuringCopyAndCommit kills the engine with SIGKILL while a copy
// into a stopped container is being received and while a commit runs, then
// restarts it: no spooled archive stays in the tmp directory, nothing of the
// unfinished copy is in the container, every layer belongs to an image or a
// container (an interrupted commit leaves none), and removing the
// containers leaves nothing behind.
func TestKill9DuringCopyAndCommit(t *testing.T) {
	p, te := startEngineProcess(t)
	te.loadBusybox()
	stopped := te.create(map[string]any{"name": "cp-target", "command": []string{"true"}})
	big := te.create(map[string]any{"name": "commit-src", "command": []string{"sh", "-c", "dd if=/dev/urandom of=/big bs=1M count=48 2>/dev/null"}})
	te.Must(http.StatusNoContent, "POST", "/containers/"+big+"/start", nil)
	if code := te.wait(big); code != 0 {
		t.Fatalf("writing /big: exit %d", code)
	}

	// A copy whose body is still arriving when the engine dies.
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		tw.WriteHeader(&tar.Header{Name: "partial", Typeflag: tar.TypeReg, Mode: 0o644, Size: 64 << 20})
		chunk := make([]byte, 1<<20)
		for i := 0; i < 64; i++ {
			rand.Read(chunk)
			if _, err := tw.Write(chunk); err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		tw.Close()
		pw.Close()
	}()
	go func() {
		req, _ := http.NewRequest(http.MethodPut, te.URL+"/containers/"+stopped+"/archive?path=/", pr)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	tmp := filepath.Join(p.Root, "tmp")
	poll.Until(t, 10*time.Second, "a copy's spool file over 1 MiB", func() bool {
		spools, _ := filepath.Glob(filepath.Join(tmp, "transfer-cp-*"))
		for _, s := range spools {
			if fi, err := os.Stat(s); err == nil && fi.Size() > 1<<20 {
				return true
			}
		}
		return false
	})
	// And a commit of a 48 MiB layer; wherever the kill lands in it, the
	// store must be consistent afterwards.
	go func() {
		resp, err := http.Post(te.URL+"/commit?container="+big+"&repo=localhost/interrupted", "", nil)
		if err == nil {
			resp.Body.Close()
		}
	}()
	time.Sleep(300 * time.Millisecond)
	p.Kill9()
	pw.CloseWithError(io.ErrClosedPipe)

	p.Start()
	if spools, _ := filepath.Glob(filepath.Join(tmp, "transfer-*")); len(spools) > 0 {
		t.Errorf("temporaries left after restart: %v", spools)
	}
	if mounted := te.showMounted(); len(mounted) > 0 {
		t.Errorf("rootfs mounts after restart: %v", mounted)
	}
	if status, _ := te.statPath(stopped, "/partial"); status != http.StatusNotFound {
		t.Errorf("the interrupted copy left /partial in the container: %d", status)
	}
	// The engine still copies and commits.
	if status, body := te.putArchive(stopped, "/", tartest.Of(t, "after", "restart"), ""); status != http.StatusOK {
		t.Fatalf("copy after restart: %d %s", status, body)
	}
	q := url.Values{"container": {big}, "repo": {"localhost/after-restart"}}
	var out struct {
		ID string `json:"Id"`
	}
	json.Unmarshal(te.Must(http.StatusOK, "POST", "/commit?"+q.Encode(), nil), &out)
	for _, id := range []string{stopped, big} {
		te.Must(http.StatusOK, "DELETE", "/containers/"+id+"?force=true&timeout=0", nil)
	}
	if l := leaks(p.Root, p.RunRoot, stopped, big); len(l) > 0 {
		t.Fatalf("leaked after removal:\n%s", strings.Join(l, "\n"))
	}
	p.Stop()

	// Every layer left is part of an image.
	driver := "vfs"
	if _, err := os.Stat(filepath.Join(p.Root, "storage", "overlay-layers")); err == nil {
		driver = "overlay"
	}
	st, err := storage.GetStore(storage.StoreOptions{GraphRoot: filepath.Join(p.Root, "storage"), RunRoot: filepath.Join(p.RunRoot, "storage"), GraphDriverName: driver})
	if err != nil {
		t.Fatalf("opening the store: %v", err)
	}
	defer st.Shutdown(true)
	layers, _ := st.Layers()
	images, _ := st.Images()
	parent := map[string]string{}
	for _, l := range layers {
		parent[l.ID] = l.Parent
	}
	used := map[string]bool{}
	for _, img := range images {
		for id := img.TopLayer; id != "" && !used[id]; id = parent[id] {
			used[id] = true
		}
	}
	for _, l := range layers {
		if !used[l.ID] {
			t.Errorf("layer %s belongs to no image after the interrupted commit", l.ID)
		}
	}
}
