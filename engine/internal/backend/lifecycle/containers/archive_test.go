package containers_test

import (
	"archive/tar"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/poll"
	"github.com/berth-project/berth/engine/internal/testsupport/tartest"
)

// untar maps entry names to contents (symlinks as "-> target").
func untar(t testing.TB, data []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("reading archive: %v", err)
		}
		body, _ := io.ReadAll(tr)
		if h.Typeflag == tar.TypeSymlink {
			body = []byte("-> " + h.Linkname)
		}
		out[h.Name] = string(body)
	}
}

type pathStat struct {
	Name       string `json:"name"`
	Size       int64  `json:"size"`
	IsDir      bool   `json:"isDir"`
	LinkTarget string `json:"linkTarget"`
}

// statPath sends HEAD .../archive and decodes the stat header.
func (te *testEngine) statPath(id, p string) (int, pathStat) {
	te.T.Helper()
	req, _ := http.NewRequest(http.MethodHead, te.URL+"/containers/"+id+"/archive?path="+url.QueryEscape(p), nil)
	resp, err := te.Client.Do(req)
	if err != nil {
		te.T.Fatal(err)
	}
	resp.Body.Close()
	var st pathStat
	if raw := resp.Header.Get("X-Docker-Container-Path-Stat"); raw != "" {
		data, err := base64.URLEncoding.DecodeString(raw)
		if err != nil || json.Unmarshal(data, &st) != nil {
			te.T.Fatalf("stat header %q: %v", raw, err)
		}
	}
	return resp.StatusCode, st
}

func (te *testEngine) getArchive(id, p string) (int, map[string]string) {
	te.T.Helper()
	status, body := te.Do("GET", "/containers/"+id+"/archive?path="+url.QueryEscape(p), nil)
	if status != http.StatusOK {
		return status, nil
	}
	return status, untar(te.T, body)
}

func (te *testEngine) putArchive(id, p string, archive []byte, query string) (int, []byte) {
	te.T.Helper()
	return te.Do("PUT", "/containers/"+id+"/archive?path="+url.QueryEscape(p)+query, bytes.NewReader(archive))
}

// TestArchiveCannotReachTheHost plants links and archives that aim at the
// host in running and stopped containers: every answer stays inside the
// container (or is refused), and the host file never changes or leaks.
func TestArchiveCannotReachTheHost(t *testing.T) {
	te := startEngine(t)
	hostDir := t.TempDir()
	secret := filepath.Join(hostDir, "secret")
	if err := os.WriteFile(secret, []byte("HOST SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	setup := "mkdir -p /app && echo in-container > /app/file && ln -s " + secret + " /app/abs-link && " +
		"ln -s ../../../../../../../" + strings.TrimPrefix(hostDir, "/") + " /app/rel-link && ln -s /etc/shadow /app/shadow-link && echo ctr-shadow > /etc/shadow"
	running := te.create(map[string]any{"command": []string{"sh", "-c", setup + " && sleep 600"},
		"mounts": []map[string]any{{"destination": "/scratch", "type": "tmpfs", "source": "tmpfs"}}})
	te.Must(http.StatusNoContent, "POST", "/containers/"+running+"/start", nil)
	stopped := te.create(map[string]any{"command": []string{"sh", "-c", setup}})
	te.Must(http.StatusNoContent, "POST", "/containers/"+stopped+"/start", nil)
	te.wait(stopped)
	poll.Until(t, 10*time.Second, "the running container's /etc/shadow", func() bool { s, _ := te.statPath(running, "/etc/shadow"); return s == http.StatusOK })

	for _, id := range []string{running, stopped} {
		for _, p := range []string{"/app/abs-link", "/app/rel-link/secret", "/app/../../../../" + strings.TrimPrefix(secret, "/"), "../../../../" + secret} {
			if status, st := te.statPath(id, p); status != http.StatusNotFound {
				t.Errorf("stat %s: %d %+v, want 404 (the host file is not in the container)", p, status, st)
			}
			if status, got := te.getArchive(id, p); status != http.StatusNotFound {
				t.Errorf("archive %s: %d %v", p, status, got)
			}
		}
		// A link to /etc/shadow is the container's /etc/shadow.
		status, st := te.statPath(id, "/app/shadow-link")
		if status != http.StatusOK || st.LinkTarget != "/etc/shadow" || st.Name != "shadow" {
			t.Errorf("stat of the shadow link: %d %+v", status, st)
		}
		if _, got := te.getArchive(id, "/app/shadow-link"); got["shadow"] != "ctr-shadow\n" {
			t.Errorf("archive of the shadow link: %v", got)
		}
		// "../../.." stops at the container's root.
		if status, st := te.statPath(id, "/../../../app/file"); status != http.StatusOK || st.LinkTarget != "/app/file" {
			t.Errorf("stat ../../../app/file: %d %+v", status, st)
		}
		// The links themselves are archived as links.
		if _, got := te.getArchive(id, "/app"); got["app/abs-link"] != "-> "+secret || got["app/file"] != "in-container\n" {
			t.Errorf("archive of /app: %v", got)
		}

		// Archives that try to leave are refused before anything is written.
		for name, archive := range map[string][]byte{
			"dot-dot":           tartest.Of(t, "first", "x", "../../../../../../../"+strings.TrimPrefix(hostDir, "/")+"/evil", "x"),
			"hard link to host": tartest.Of(t, "first", "x", "h", "=> "+secret),
			"through own link":  tartest.Of(t, "first", "x", "out", "-> "+hostDir, "out/evil", "x"),
			"truncated":         tartest.Of(t, "first", "x", "second", strings.Repeat("y", 3000))[:1600],
		} {
			if status, body := te.putArchive(id, "/app", archive, ""); status != http.StatusBadRequest {
				t.Errorf("%s archive: %d %s, want 400", name, status, body)
			}
		}
		if status, got := te.getArchive(id, "/app/first"); status != http.StatusNotFound {
			t.Errorf("a refused archive left /app/first: %d %v", status, got)
		}
		// An absolute entry is placed inside the destination.
		if status, body := te.putArchive(id, "/app", tartest.Of(t, "/abs-entry", "kept"), ""); status != http.StatusOK {
			t.Errorf("absolute entry: %d %s", status, body)
		}
		if _, got := te.getArchive(id, "/app/abs-entry"); got["abs-entry"] != "kept" {
			t.Errorf("absolute entry landed elsewhere: %v", got)
		}
		// Writing over an existing link replaces the link, never its target.
		if status, body := te.putArchive(id, "/app", tartest.Of(t, "abs-link", "replaced"), ""); status != http.StatusOK {
			t.Errorf("over a link: %d %s", status, body)
		}
	}
	if data, err := os.ReadFile(secret); err != nil || string(data) != "HOST SECRET\n" {
		t.Fatalf("the host file changed: %q %v", data, err)
	}
	if entries, _ := os.ReadDir(hostDir); len(entries) != 1 {
		t.Fatalf("the host directory changed: %v", entries)
	}
	// The running container's tmpfs is reachable (its mount namespace).
	if status, body := te.putArchive(running, "/scratch", tartest.Of(t, "in-tmpfs", "tmpfs data"), ""); status != http.StatusOK {
		t.Fatalf("put into tmpfs: %d %s", status, body)
	}
	if _, got := te.getArchive(running, "/scratch/in-tmpfs"); got["in-tmpfs"] != "tmpfs data" {
		t.Errorf("tmpfs file: %v", got)
	}
	// 400s and 404s name what is wrong.
	te.Must(http.StatusBadRequest, "GET", "/containers/"+running+"/archive", nil)
	te.Must(http.StatusNotFound, "GET", "/containers/nosuch/archive?path=/", nil)
	if status, _ := te.putArchive(running, "/app", tartest.Of(t, "x", "y"), "&rename=notjson"); status != http.StatusBadRequest {
		t.Errorf("bad rename: %d", status)
	}
	if status, _ := te.putArchive(running, "/app/file", tartest.Of(t, "x", "y"), ""); status != http.StatusBadRequest {
		t.Errorf("file destination: %d", status)
	}
	if status, _ := te.putArchive(running, "/nonexistent", tartest.Of(t, "x", "y"), ""); status != http.StatusNotFound {
		t.Errorf("missing destination: %d", status)
	}
	// noOverwriteDirNonDir refuses a file over a directory, as sent by podman 4.3.1 (lower case).
	if status, _ := te.putArchive(stopped, "/", tartest.Of(t, "app", "file now"), "&nooverwritedirnondir=true"); status != http.StatusBadRequest {
		t.Errorf("file over directory: %d", status)
	}
	// Copies leave no mount of the stopped container behind.
	mounted := te.showMounted()
	if _, ok := mounted[stopped]; ok {
		t.Errorf("the stopped container stays mounted: %v", mounted)
	}
}

func TestCommitAndImageChanges(t *testing.T) {
	te := startEngine(t)
	// /motd appears whole (renamed into place) and last: once the poll
	// below sees it, every change is made.
	id := te.create(map[string]any{"command": []string{"sh", "-c", "rm /bin/yes; echo committed > /motd.new; mv /motd.new /motd; sleep 600"}, "env": map[string]string{"FROM_CTR": "1"}, "labels": map[string]string{"l": "v"}})
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	poll.Until(t, 10*time.Second, "the container's /motd", func() bool { s, _ := te.statPath(id, "/motd"); return s == http.StatusOK })
	q := url.Values{"container": {id}, "repo": {"localhost/committed"}, "tag": {"1"}, "author": {"A <a@b>"}, "comment": {"a message"},
		"changes": {`CMD ["/bin/cat", "/motd"]`, "ENV GREETING=hi\nLABEL stage=two"}, "pause": {"true"}}
	var out struct {
		ID string `json:"Id"`
	}
	json.Unmarshal(te.Must(http.StatusOK, "POST", "/commit?"+q.Encode(), nil), &out)
	if len(out.ID) != 64 {
		t.Fatalf("commit answered %q", out.ID)
	}
	if d := te.inspect(id); d.State.Status != "running" {
		t.Errorf("after a paused commit the container is %s", d.State.Status)
	}
	var img struct {
		Config struct {
			Cmd    []string
			Env    []string
			Labels map[string]string
		}
		Author  string
		Comment string
		Parent  string
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/images/localhost%2Fcommitted:1/json", nil), &img)
	if !slices.Equal(img.Config.Cmd, []string{"/bin/cat", "/motd"}) || !slices.Contains(img.Config.Env, "GREETING=hi") ||
		!slices.Contains(img.Config.Env, "FROM_CTR=1") || img.Config.Labels["stage"] != "two" || img.Config.Labels["l"] != "v" || img.Author != "A <a@b>" {
		t.Errorf("committed image: %+v", img)
	}
	// The committed image runs with the container's changes and its new CMD.
	code, lines := te.run(map[string]any{"image": "localhost/committed:1"})
	if code != 0 || !slices.Equal(lines, []string{"committed"}) {
		t.Errorf("run committed image: %d %q", code, lines)
	}
	// Image changes are relative to the parent layer.
	var changes []struct {
		Path string
		Kind int
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/images/localhost%2Fcommitted:1/changes", nil), &changes)
	kinds := map[string]int{}
	for _, c := range changes {
		kinds[c.Path] = c.Kind
	}
	if kinds["/motd"] != 1 || kinds["/bin/yes"] != 2 || len(changes) > 4 {
		t.Errorf("image changes: %v", changes)
	}
	// podman 4.3.1's `image diff` asks the container route with diffType=image.
	if status, _ := te.Do("GET", "/containers/localhost%2Fcommitted:1/changes?diffType=image", nil); status != http.StatusOK {
		t.Errorf("diffType=image on the container route: %d", status)
	}
	te.Must(http.StatusNotFound, "GET", "/containers/"+id+"/changes?diffType=image", nil)
	te.Must(http.StatusBadRequest, "GET", "/containers/"+id+"/changes?diffType=layer", nil)
	te.Must(http.StatusNotFound, "GET", "/images/nosuch/changes", nil)
	// Docker format keeps ONBUILD; OCI refuses it.
	q = url.Values{"container": {id}, "changes": {"ONBUILD RUN true"}}
	te.Must(http.StatusBadRequest, "POST", "/commit?"+q.Encode(), nil)
	q.Set("format", "docker")
	te.Must(http.StatusOK, "POST", "/commit?"+q.Encode(), nil)
	// Bad input.
	te.Must(http.StatusNotFound, "POST", "/commit?container=nosuch", nil)
	te.Must(http.StatusBadRequest, "POST", "/commit", nil)
	te.Must(http.StatusBadRequest, "POST", "/commit?container="+id+"&format=v1", nil)
	te.Must(http.StatusBadRequest, "POST", "/commit?container="+id+"&tag=2", nil)
	te.Must(http.StatusBadRequest, "POST", "/commit?container="+id+"&changes=RUN+x", nil)
	// stream=true answers JSON lines ending with the ID.
	body := te.Must(http.StatusOK, "POST", "/commit?container="+id+"&stream=true&squash=true", nil)
	lines = strings.Split(strings.TrimSpace(string(body)), "\n")
	var last struct{ Stream string }
	json.Unmarshal([]byte(lines[len(lines)-1]), &last)
	if len(last.Stream) != 64 {
		t.Errorf("streamed commit: %s", body)
	}
}

func TestPodmanRemoteCopyCommitDiff(t *testing.T) {
	te := startEngine(t)
	podman := podmanRemote(t, te)
	must := mustSucceed(t, podman)
	dir := t.TempDir()
	hostFile := filepath.Join(dir, "hello.txt")
	os.WriteFile(hostFile, []byte("hello from host\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, "tree", "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "tree", "sub", "f"), []byte("deep\n"), 0o644)

	must("run", "-d", "--name", "cp-run", "--network", "none", "busybox", "sleep", "600")
	must("create", "--name", "cp-stopped", "--network", "none", "busybox", "true")
	for _, ctr := range []string{"cp-run", "cp-stopped"} {
		must("cp", hostFile, ctr+":/copied.txt")
		must("cp", filepath.Join(dir, "tree"), ctr+":/")
		back := filepath.Join(dir, "back-"+ctr)
		must("cp", ctr+":/tree", back)
		if data, err := os.ReadFile(filepath.Join(back, "sub", "f")); err != nil || string(data) != "deep\n" {
			t.Errorf("%s: directory round trip: %q %v", ctr, data, err)
		}
		out := must("cp", ctr+":/copied.txt", "-")
		if got := untar(t, []byte(out)); got["copied.txt"] != "hello from host\n" {
			t.Errorf("%s: cp to stdout: %v", ctr, got)
		}
		if _, err := podman("cp", ctr+":/nonexistent", dir); err == nil {
			t.Errorf("%s: cp of a missing path succeeded", ctr)
		}
	}
	must("exec", "cp-run", "sh", "-c", "rm /bin/yes")
	out := must("diff", "cp-run")
	for _, want := range []string{"A /copied.txt", "A /tree/sub/f", "D /bin/yes"} {
		if !strings.Contains(out, want) {
			t.Errorf("diff lacks %q:\n%s", want, out)
		}
	}
	id := strings.TrimSpace(must("commit", "--pause", "--author", "Tester", "--message", "from podman", "-f", "docker",
		"--change", `CMD ["/bin/cat", "/copied.txt"]`, "cp-run", "localhost/podman-committed:1"))
	if len(id) != 64 {
		t.Fatalf("commit printed %q", id)
	}
	if out := must("run", "--rm", "--network", "none", "localhost/podman-committed:1"); out != "hello from host\n" {
		t.Errorf("committed image ran: %q", out)
	}
	out = must("image", "diff", "localhost/podman-committed:1")
	if !strings.Contains(out, "A /copied.txt") || !strings.Contains(out, "D /bin/yes") {
		t.Errorf("image diff:\n%s", out)
	}
	if out := must("diff", "localhost/podman-committed:1"); !strings.Contains(out, "A /copied.txt") {
		t.Errorf("diff of an image:\n%s", out)
	}
	if out := must("history", "--format", "{{.Comment}}", "localhost/podman-committed:1"); !strings.Contains(out, "from podman") {
		t.Errorf("history: %q", out)
	}
	must("rm", "-f", "-t", "0", "cp-run", "cp-stopped")
}

// TestArchiveOfVolumes: a plain volume of a stopped container is reached
// through its directory; a tmpfs volume exists only while mounted, so a
// copy into a stopped container's is refused (409) instead of landing
// beneath the mount point, and works while the container runs.
func TestArchiveOfVolumes(t *testing.T) {
	te := startEngine(t)
	te.Must(http.StatusCreated, "POST", "/volumes/create", map[string]any{"Name": "cp-plain"})
	te.Must(http.StatusCreated, "POST", "/volumes/create", map[string]any{"Name": "cp-tmpfs", "Options": map[string]string{"type": "tmpfs", "device": "tmpfs"}})
	vols := []map[string]any{{"Name": "cp-plain", "Dest": "/plain"}, {"Name": "cp-tmpfs", "Dest": "/tmpfs"}}
	stopped := te.create(map[string]any{"command": []string{"true"}, "volumes": vols})
	if status, body := te.putArchive(stopped, "/plain", tartest.Of(t, "f", "in volume"), ""); status != http.StatusOK {
		t.Fatalf("put into a plain volume: %d %s", status, body)
	}
	if status, body := te.putArchive(stopped, "/tmpfs", tartest.Of(t, "f", "x"), ""); status != http.StatusConflict {
		t.Errorf("put into the tmpfs volume of a stopped container: %d %s", status, body)
	}
	running := te.create(map[string]any{"command": []string{"sleep", "600"}, "volumes": vols})
	te.Must(http.StatusNoContent, "POST", "/containers/"+running+"/start", nil)
	if _, got := te.getArchive(running, "/plain/f"); got["f"] != "in volume" {
		t.Errorf("the plain volume seen from a running container: %v", got)
	}
	if status, body := te.putArchive(running, "/tmpfs", tartest.Of(t, "f", "in tmpfs"), ""); status != http.StatusOK {
		t.Errorf("put into the tmpfs volume of a running container: %d %s", status, body)
	}
	if _, got := te.getArchive(running, "/tmpfs/f"); got["f"] != "in tmpfs" {
		t.Errorf("tmpfs volume file: %v", got)
	}
}
