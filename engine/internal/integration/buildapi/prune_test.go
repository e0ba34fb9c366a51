package buildapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// prunefile builds on busybox in three RUN steps, the second with a cache
// mount; LAST is the last step's command.
const prunefile = `FROM localhost/busybox
RUN echo a > /a
RUN --mount=type=cache,target=/cache echo x > /cache/f
RUN LAST
`

// prune posts a Docker API build cache prune with query and decodes the answer.
func (e *testEngine) prune(query url.Values) (int, []string, uint64, string) {
	e.T.Helper()
	r := e.do(http.MethodPost, "/v1.41/build/prune?"+query.Encode(), "", nil)
	var rep struct {
		CachesDeleted  []string
		SpaceReclaimed uint64
	}
	if r.status == http.StatusOK {
		if err := json.Unmarshal(r.body, &rep); err != nil || rep.CachesDeleted == nil {
			e.T.Fatalf("build prune answer %s: %v", r.body, err)
		}
	}
	return r.status, rep.CachesDeleted, rep.SpaceReclaimed, string(r.body)
}

// TestBuildCachePrune: POST /build/prune (docker builder prune) removes the
// step images nothing is built on any more, keeps the cache of the tagged
// image, and with all removes every step image and the RUN cache mount
// directories, after which a rebuild runs every step again. Size targets and
// filters other than until are refused with 400, removing nothing.
func TestBuildCachePrune(t *testing.T) {
	e := startEngine(t)
	build := func(last string) buildResult {
		t.Helper()
		files := map[string]string{"Containerfile": strings.Replace(prunefile, "LAST", last, 1)}
		res := e.build(files, url.Values{"layers": {"1"}, "t": {"pc:1"}, "dockerfile": {`["Containerfile"]`}})
		if res.status != http.StatusOK || res.err != "" {
			t.Fatalf("build: %d %q\n%s", res.status, res.err, res.output)
		}
		return res
	}
	cacheDirs := func() []string {
		t.Helper()
		entries, err := os.ReadDir(filepath.Join(e.Root, "build-cache"))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, d := range entries {
			names = append(names, d.Name())
		}
		return names
	}

	first := build("echo b > /b")
	// The last step changes: the first build's final image loses its tag
	// and is dangling cache; the two steps before it are shared.
	second := build("echo c > /c")
	if n := strings.Count(second.output, "Using cache"); n != 2 {
		t.Fatalf("the second build used the cache %d times, want 2:\n%s", n, second.output)
	}
	dirs := cacheDirs()
	if len(dirs) != 1 {
		t.Fatalf("cache mount directories %v, want one", dirs)
	}

	for _, bad := range []url.Values{
		{"filters": {`{"type":["regular"]}`}},
		{"filters": {`{"until":["yesterday"]}`}},
		{"keep-storage": {"1048576"}},
		{"reserved-space": {"1048576"}},
		{"max-used-space": {"1"}},
		{"min-free-space": {"1"}},
	} {
		status, _, _, body := e.prune(bad)
		name := ""
		for k := range bad {
			name = k
		}
		if status != http.StatusBadRequest || !strings.Contains(body, name) {
			t.Fatalf("prune with %v: %d %s, want 400 naming %s", bad, status, body, name)
		}
	}
	// until: the cache is younger than a day, so nothing qualifies.
	if status, deleted, _, body := e.prune(url.Values{"all": {"1"}, "filters": {`{"until":["24h"]}`}}); status != http.StatusOK || len(deleted) != 0 {
		t.Fatalf("prune until 24h ago: %d %s, want nothing removed", status, body)
	}

	status, deleted, freed, body := e.prune(nil)
	if status != http.StatusOK || !slices.Equal(deleted, []string{strings.TrimPrefix(first.id, "sha256:")}) || freed == 0 {
		t.Fatalf("prune: %d %s, want the first build's final image (%s) and its layer's bytes", status, body, first.id)
	}
	if got := cacheDirs(); !slices.Equal(got, dirs) {
		t.Fatalf("a prune without all removed cache mounts: %v", got)
	}
	if r := e.do(http.MethodGet, "/v4.3.1/libpod/images/"+first.id+"/exists", "", nil); r.status != http.StatusNotFound {
		t.Fatalf("the pruned image still exists: %d", r.status)
	}
	if again := build("echo c > /c"); strings.Count(again.output, "Using cache") != 3 || again.id != second.id {
		t.Fatalf("after a prune without all the tagged image's cache is gone:\n%s", again.output)
	}

	status, deleted, _, body = e.prune(url.Values{"all": {"true"}})
	if status != http.StatusOK || len(deleted) != 3 || !slices.Contains(deleted, dirs[0]) {
		t.Fatalf("prune all: %d %s, want the two step images under pc:1 and the cache directory %s", status, body, dirs[0])
	}
	if got := cacheDirs(); len(got) != 0 {
		t.Fatalf("cache mount directories left after a prune with all: %v", got)
	}
	if img := e.inspect("pc:1"); "sha256:"+img.ID != second.id {
		t.Fatalf("pc:1 is %s after the prune, want %s", img.ID, second.id)
	}
	if fresh := build("echo c > /c"); strings.Contains(fresh.output, "Using cache") {
		t.Fatalf("a build after a prune with all used the cache:\n%s", fresh.output)
	}
	if status, deleted, _, body := e.prune(url.Values{"all": {"1"}}); status != http.StatusOK || len(deleted) == 0 {
		t.Fatalf("prune all after the fresh build: %d %s, want its step images", status, body)
	}
}

// TestImagePruneBuildCache: podman image prune --build-cache (buildcache,
// not read before) and --all empty the RUN --mount=type=cache directories
// as Podman's do; a plain image prune keeps them.
func TestImagePruneBuildCache(t *testing.T) {
	e := startEngine(t)
	files := map[string]string{"Containerfile": strings.Replace(prunefile, "LAST", "echo b > /b", 1)}
	if res := e.build(files, url.Values{"t": {"pbc:1"}}); res.status != http.StatusOK || res.err != "" {
		t.Fatalf("build: %d %q\n%s", res.status, res.err, res.output)
	}
	dirs := func() int {
		entries, _ := os.ReadDir(filepath.Join(e.Root, "build-cache"))
		return len(entries)
	}
	if n := dirs(); n != 1 {
		t.Fatalf("%d cache mount directories after the build, want 1", n)
	}
	if r := e.do(http.MethodPost, "/v5.0.0/libpod/images/prune", "", nil); r.status != http.StatusOK || dirs() != 1 {
		t.Fatalf("a plain image prune: %d %s, %d cache directories left, want 1", r.status, r.body, dirs())
	}
	if r := e.do(http.MethodPost, "/v5.0.0/libpod/images/prune?buildcache=true", "", nil); r.status != http.StatusOK || dirs() != 0 {
		t.Fatalf("image prune --build-cache: %d %s, %d cache directories left", r.status, r.body, dirs())
	}
	if r := e.do(http.MethodPost, "/v5.0.0/libpod/images/prune?buildcache=maybe", "", nil); r.status != http.StatusBadRequest {
		t.Fatalf("buildcache=maybe: %d %s", r.status, r.body)
	}
}
