package buildapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/need"
)

// requireGit skips (or under BERTH_TEST_STRICT fails) without git.
func requireGit(t *testing.T) {
	t.Helper()
	need.All(t, "remote build tests (hack/deps.sh installs git)", "git")
}

// gitRepo makes a bare repository under dir (served as /git/repo.git over
// git's dumb http protocol) with one commit tagged v1: top.txt and
// sub/inside.txt.
func gitRepo(t *testing.T, dir string) {
	t.Helper()
	run := func(cwd string, args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = cwd
		cmd.Env = append(os.Environ(), "HOME="+dir, "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	bare := filepath.Join(dir, "git", "repo.git")
	work := filepath.Join(dir, "work")
	for _, d := range []string{bare, filepath.Join(work, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	run(bare, "init", "-q", "--bare", "--initial-branch=main")
	run(work, "init", "-q", "--initial-branch=main")
	for name, content := range map[string]string{"top.txt": "top\n", "sub/inside.txt": "inside\n"} {
		if err := os.WriteFile(filepath.Join(work, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(work, "add", ".")
	run(work, "-c", "user.name=berth", "-c", "user.email=berth@example.invalid", "commit", "-q", "-m", "one")
	run(work, "tag", "v1")
	run(work, "push", "-q", bare, "main", "v1")
	run(bare, "update-server-info")
}

// remoteServer serves files (by path, with a Last-Modified time unless the
// name starts with "nolm") and the git repository under /git/.
type remoteServer struct {
	mu    sync.Mutex
	files map[string]string
}

func (s *remoteServer) set(name, content string) {
	s.mu.Lock()
	s.files[name] = content
	s.mu.Unlock()
}

func TestBuildAddURLsAndGit(t *testing.T) {
	requireGit(t)
	e := startEngine(t)
	dir := t.TempDir()
	gitRepo(t, dir)
	lastModified := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)
	srv := &remoteServer{files: map[string]string{
		"hello.txt":      "hello over http\n",
		"nolm.txt":       "no date\n",
		"archive.tar.gz": gzipTar(t, map[string]string{"inner.txt": "must stay packed"}),
	}}
	gitFiles := http.FileServer(http.Dir(dir))
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/git/") {
			gitFiles.ServeHTTP(w, r)
			return
		}
		name := strings.TrimPrefix(r.URL.Path, "/files/")
		srv.mu.Lock()
		content, ok := srv.files[name]
		srv.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		if !strings.HasPrefix(name, "nolm") {
			w.Header().Set("Last-Modified", lastModified.Format(http.TimeFormat))
		}
		w.Write([]byte(content))
	}))
	defer web.Close()
	base := web.URL
	sum := fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(srv.files["hello.txt"])))
	containerfile := strings.Join([]string{
		"FROM localhost/busybox",
		"ADD " + base + "/files/hello.txt /hello.txt",
		"ADD --chown=1000:1001 --chmod=640 " + base + "/files/hello.txt /owned/",
		"ADD " + base + "/files/archive.tar.gz /dl/",
		"ADD --checksum=" + sum + " " + base + "/files/hello.txt /checked",
		"ADD " + base + "/files/nolm.txt /nolm",
		"ADD " + base + "/git/repo.git#v1:sub /fromgit/",
		"ADD --keep-git-dir=true " + base + "/git/repo.git /withgit/",
		"ADD " + base + "/git/repo.git /nogit/",
		`RUN stat -c '%a %u:%g %Y %n' /hello.txt /owned/hello.txt /dl/archive.tar.gz /checked /nolm && ls -A /fromgit /withgit /nogit && cat /fromgit/inside.txt`,
	}, "\n") + "\n"
	files := map[string]string{"Containerfile": containerfile}
	first := e.build(files, layered(nil))
	if first.status != http.StatusOK || first.err != "" {
		t.Fatalf("build: %d %q\n%s", first.status, first.err, first.output)
	}
	mtime := fmt.Sprint(lastModified.Unix())
	for _, want := range []string{
		"600 0:0 " + mtime + " /hello.txt",
		"640 1000:1001 " + mtime + " /owned/hello.txt",
		"600 0:0 " + mtime + " /dl/archive.tar.gz",
		"600 0:0 " + mtime + " /checked",
		"600 0:0 0 /nolm",
		"/fromgit:\ninside.txt\n",
		"/withgit:\n.git\nsub\ntop.txt\n",
		"/nogit:\nsub\ntop.txt\n",
		"inside\n",
	} {
		if !strings.Contains(first.output, want) {
			t.Fatalf("build output lacks %q:\n%s", want, first.output)
		}
	}

	again := e.build(files, layered(nil))
	if again.id != first.id || strings.Count(again.output, "Using cache") != 9 {
		t.Fatalf("an unchanged rebuild did not reuse every step (%s vs %s):\n%s", again.id, first.id, again.output)
	}
	// The file behind the URL changes: its ADD steps rerun (the one with
	// a checksum now fails it).
	srv.set("hello.txt", "changed\n")
	changed := e.build(files, layered(nil))
	if !strings.Contains(changed.err, "unexpected response digest") || strings.Contains(changed.output, "Using cache") {
		t.Fatalf("a changed download with a stale --checksum: %q\n%s", changed.err, changed.output)
	}

	for _, tc := range []struct{ line, want string }{
		{"ADD " + base + "/files/missing /x", "invalid response status 404"},
		{"ADD ftp://127.0.0.1/x /x", "only http:// and https:// URLs"},
		{"ADD --checksum=" + sum + " local.txt /x", "only supported for URL sources"},
		{"ADD --checksum=sha256:abc " + base + "/files/nolm.txt /x", "invalid --checksum"},
		{"ADD " + base + "/git/repo.git#nosuchref /x/", "checking out"},
		{"ADD " + base + "/git/repo.git#v1:nodir /x/", "is not a directory"},
	} {
		res := e.build(map[string]string{"Containerfile": "FROM localhost/busybox\n" + tc.line + "\n", "local.txt": "x"}, layered(nil))
		if res.status == http.StatusOK && !strings.Contains(res.err, tc.want) || res.status != http.StatusOK && !bytes.Contains(res.body, []byte(tc.want)) {
			t.Fatalf("%s: want an error with %q, got %d %q %s", tc.line, tc.want, res.status, res.err, res.body)
		}
	}
	if leftovers, _ := filepath.Glob(filepath.Join(e.Root, "tmp", "build-remote-*")); len(leftovers) > 0 {
		t.Fatalf("downloads left behind: %v", leftovers)
	}
}
