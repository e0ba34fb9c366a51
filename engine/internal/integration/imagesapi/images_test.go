package imagesapi

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/testimage"
)

// busybox is a tagged test image.
func busybox(tag string) testimage.Image { return testimage.Busybox(tag, "sh") }

// labelled is a tagged test image with labels, created at the given time.
func labelled(tag string, created time.Time, labels map[string]string) testimage.Image {
	return testimage.Image{RepoTags: []string{tag}, Created: created, Config: testimage.Config{Cmd: []string{"sh"}, Labels: labels}}
}

func TestLoadListInspect(t *testing.T) {
	e := startEngine(t)
	names := e.load(
		testimage.Image{RepoTags: []string{"localhost/app:1"}, Config: testimage.Config{
			Cmd: []string{"echo", "hi"}, Entrypoint: []string{"/bin/sh", "-c"}, Env: []string{"A=1"},
			Labels: map[string]string{"tier": "web"}, WorkingDir: "/tmp", User: "nobody",
			Healthcheck: &testimage.Healthcheck{Test: []string{"CMD", "true"}, Interval: 30 * time.Second, Retries: 3},
		}, Layers: []testimage.Layer{{Files: []testimage.File{{Path: "/etc/app.conf", Data: []byte("x=1")}}}}},
		busybox("docker.io/library/busybox:latest"),
	)
	sort.Strings(names)
	if strings.Join(names, ",") != "docker.io/library/busybox:latest,localhost/app:1" {
		t.Fatalf("loaded %v", names)
	}

	list := e.list("")
	if len(list) != 2 {
		t.Fatalf("listed %d images, want 2: %+v", len(list), list)
	}
	var app summary
	for _, s := range list {
		if contains(s.Names, "localhost/app:1") {
			app = s
		}
	}
	if len(app.ID) != 64 || app.Labels["tier"] != "web" || app.Size <= 1_000_000 || app.Digest == "" ||
		!contains(app.RepoTags, "localhost/app:1") || len(app.RepoDigests) != 1 || !strings.HasPrefix(app.RepoDigests[0], "localhost/app@sha256:") {
		t.Errorf("summary %+v", app)
	}
	if app.Created != testimage.DefaultCreated.Unix() {
		t.Errorf("created %d, want %d", app.Created, testimage.DefaultCreated.Unix())
	}

	var inspect struct {
		ID           string `json:"Id"`
		Digest       string
		RepoTags     []string
		RepoDigests  []string
		Created      time.Time
		Architecture string
		Os           string
		Size         int64
		User         string
		Labels       map[string]string
		ManifestType string
		Config       struct {
			Cmd, Entrypoint, Env []string
			WorkingDir, User     string
		}
		RootFS struct {
			Type   string
			Layers []string
		}
		GraphDriver struct{ Name string }
		History     []struct {
			CreatedBy string `json:"created_by"`
		}
		Healthcheck *struct {
			Test     []string
			Interval time.Duration
			Retries  int
		}
	}
	// Short name, full name, ID and ID prefix all find the image.
	for _, name := range []string{"app:1", "localhost/app:1", app.ID, app.ID[:12], "sha256:" + app.ID} {
		e.do(http.MethodGet, "/v4.3.1/libpod/images/"+url.PathEscape(name)+"/json", nil).expect(t, http.StatusOK).json(t, &inspect)
		if inspect.ID != app.ID {
			t.Errorf("inspect %q found %s, want %s", name, inspect.ID, app.ID)
		}
	}
	if inspect.Config.WorkingDir != "/tmp" || inspect.User != "nobody" || strings.Join(inspect.Config.Cmd, " ") != "echo hi" ||
		strings.Join(inspect.Config.Entrypoint, " ") != "/bin/sh -c" || inspect.Labels["tier"] != "web" || inspect.Os != "linux" ||
		inspect.RootFS.Type != "layers" || len(inspect.RootFS.Layers) != 2 || inspect.Digest != app.Digest || inspect.GraphDriver.Name == "" ||
		len(inspect.History) != 3 || inspect.ManifestType == "" || !inspect.Created.Equal(testimage.DefaultCreated) {
		t.Errorf("inspect %+v", inspect)
	}
	if inspect.Healthcheck == nil || inspect.Healthcheck.Interval != 30*time.Second || inspect.Healthcheck.Retries != 3 {
		t.Errorf("healthcheck %+v", inspect.Healthcheck)
	}

	// A docker.io image is found by its short name too.
	e.do(http.MethodGet, "/libpod/images/busybox/exists", nil).expect(t, http.StatusNoContent)
	e.do(http.MethodGet, "/libpod/images/busybox:latest/json", nil).expect(t, http.StatusOK)
	// Digested references.
	e.do(http.MethodGet, "/libpod/images/"+url.PathEscape(app.RepoDigests[0])+"/exists", nil).expect(t, http.StatusNoContent)
}

func TestUnescapedSlashesInNames(t *testing.T) {
	e := startEngine(t)
	e.load(busybox("quay.io/org/team/app:2"))
	// Podman's client escapes slashes; curl users do not. Both work.
	e.do(http.MethodGet, "/v4.3.1/libpod/images/quay.io%2Forg%2Fteam%2Fapp:2/json", nil).expect(t, http.StatusOK)
	e.do(http.MethodGet, "/v4.3.1/libpod/images/quay.io/org/team/app:2/json", nil).expect(t, http.StatusOK)
	e.do(http.MethodGet, "/libpod/images/quay.io/org/team/app:2/exists", nil).expect(t, http.StatusNoContent)
	e.do(http.MethodPost, "/libpod/images/quay.io/org/team/app:2/tag?repo=quay.io/org/other&tag=3", nil).expect(t, http.StatusCreated)
	e.do(http.MethodGet, "/libpod/images/quay.io/org/other:3/exists", nil).expect(t, http.StatusNoContent)
	e.do(http.MethodDelete, "/libpod/images/quay.io/org/other:3", nil).expect(t, http.StatusOK)
	e.do(http.MethodGet, "/libpod/images/quay.io/org/other:3/exists", nil).expect(t, http.StatusNotFound)
}

func TestBadImageNames(t *testing.T) {
	e := startEngine(t)
	e.load(busybox("localhost/present:1"))
	cases := []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, "/libpod/images/absent/json", http.StatusNotFound},
		{http.MethodGet, "/libpod/images/0123456789ab/json", http.StatusNotFound},
		{http.MethodGet, "/libpod/images/" + strings.Repeat("a", 64) + "/json", http.StatusNotFound},
		{http.MethodGet, "/libpod/images/UPPER/json", http.StatusBadRequest},
		{http.MethodGet, "/libpod/images/bad%20name/json", http.StatusBadRequest},
		{http.MethodGet, "/libpod/images/a::b/json", http.StatusBadRequest},
		{http.MethodGet, "/libpod/images/absent/history", http.StatusNotFound},
		{http.MethodGet, "/libpod/images/absent/tree", http.StatusNotFound},
		{http.MethodGet, "/libpod/images/UPPER/resolve", http.StatusBadRequest},
		{http.MethodPost, "/libpod/images/absent/tag?repo=x", http.StatusNotFound},
		{http.MethodPost, "/libpod/images/present:1/tag", http.StatusBadRequest},
		{http.MethodPost, "/libpod/images/present:1/tag?repo=BAD", http.StatusBadRequest},
		{http.MethodPost, "/libpod/images/present:1/tag?repo=ok&tag=bad%20tag", http.StatusBadRequest},
		{http.MethodPost, "/libpod/images/present:1/tag?repo=ok@sha256:abc", http.StatusBadRequest},
		{http.MethodPost, "/libpod/images/present:1/untag?tag=1", http.StatusBadRequest},
		{http.MethodPost, "/libpod/images/present:1/untag?repo=notmine&tag=1", http.StatusBadRequest},
		{http.MethodPost, "/libpod/images/absent/untag", http.StatusNotFound},
		{http.MethodDelete, "/libpod/images/absent", http.StatusNotFound},
		{http.MethodDelete, "/libpod/images/remove", http.StatusBadRequest},
		{http.MethodGet, "/libpod/images/json?all=maybe", http.StatusBadRequest},
		{http.MethodGet, "/libpod/images/present:1/tree?whatrequires=x", http.StatusBadRequest},
	}
	for _, c := range cases {
		e.do(c.method, c.path, nil).engineError(t, c.status)
	}
	// exists answers 204, or 404 with the error body (Podman's clients decode it).
	for _, name := range []string{"absent:1", "UPPER", "bad%20name"} {
		e.do(http.MethodGet, "/libpod/images/"+name+"/exists", nil).engineError(t, http.StatusNotFound)
	}
	// Nothing changed.
	if got := tagsOf(e.list("")); strings.Join(got, ",") != "localhost/present:1" {
		t.Errorf("images after bad requests: %v", got)
	}
}

func TestTagUntag(t *testing.T) {
	e := startEngine(t)
	e.load(busybox("localhost/orig:1"), labelled("localhost/other:1", testimage.DefaultCreated.Add(time.Hour), map[string]string{"o": "1"}))
	e.do(http.MethodPost, "/v4.3.1/libpod/images/orig:1/tag?repo=copy&tag=2", nil).expect(t, http.StatusCreated)
	e.do(http.MethodPost, "/v4.3.1/libpod/images/orig:1/tag?repo=registry.example:5000/team/copy", nil).expect(t, http.StatusCreated)
	orig := e.list(filtersQuery(map[string][]string{"reference": {"orig"}}))
	if len(orig) != 1 {
		t.Fatalf("reference=orig matched %d images", len(orig))
	}
	names := orig[0].Names
	for _, want := range []string{"localhost/orig:1", "localhost/copy:2", "registry.example:5000/team/copy:latest"} {
		if !contains(names, want) {
			t.Errorf("names %v lack %s", names, want)
		}
	}
	// A tag held by another image moves.
	e.do(http.MethodPost, "/libpod/images/other:1/tag?repo=copy&tag=2", nil).expect(t, http.StatusCreated)
	e.do(http.MethodGet, "/libpod/images/copy:2/json", nil).expect(t, http.StatusOK)
	var moved struct{ Labels map[string]string }
	e.do(http.MethodGet, "/libpod/images/copy:2/json", nil).json(t, &moved)
	if moved.Labels["o"] != "1" {
		t.Errorf("copy:2 did not move to the other image")
	}
	// Untag one name, then all.
	e.do(http.MethodPost, "/libpod/images/orig:1/untag?repo=registry.example:5000/team/copy&tag=latest", nil).expect(t, http.StatusCreated)
	e.do(http.MethodGet, "/libpod/images/registry.example:5000/team/copy/exists", nil).expect(t, http.StatusNotFound)
	id := orig[0].ID
	e.do(http.MethodPost, "/libpod/images/orig:1/untag", nil).expect(t, http.StatusCreated)
	dangling := e.list(filtersQuery(map[string][]string{"dangling": {"true"}}))
	if len(dangling) != 1 || dangling[0].ID != id || len(dangling[0].Names) != 0 || !dangling[0].Dangling {
		t.Errorf("after untag all: dangling %+v", dangling)
	}
}

func TestListFilters(t *testing.T) {
	e := startEngine(t)
	t0 := testimage.DefaultCreated
	e.load(
		labelled("localhost/web:1", t0, map[string]string{"tier": "web", "env": "prod"}),
		labelled("localhost/web:2", t0.Add(time.Hour), map[string]string{"tier": "web", "env": "dev"}),
		labelled("quay.io/team/db:1", t0.Add(2*time.Hour), map[string]string{"tier": "db"}),
		labelled("localhost/old:1", t0.Add(-time.Hour), nil),
	)
	e.do(http.MethodPost, "/libpod/images/old:1/untag", nil).expect(t, http.StatusCreated)
	all := e.list("")
	idOf := map[string]string{}
	for _, s := range all {
		for _, n := range s.Names {
			idOf[n] = s.ID
		}
	}
	cases := []struct {
		name    string
		filters map[string][]string
		want    []string
	}{
		{"reference short", map[string][]string{"reference": {"web"}}, []string{"localhost/web:1", "localhost/web:2"}},
		{"reference tag", map[string][]string{"reference": {"web:2"}}, []string{"localhost/web:2"}},
		{"reference full", map[string][]string{"reference": {"quay.io/team/db:1"}}, []string{"quay.io/team/db:1"}},
		{"reference wildcard", map[string][]string{"reference": {"localhost/w*"}}, []string{"localhost/web:1", "localhost/web:2"}},
		{"reference alternatives", map[string][]string{"reference": {"web:1", "team/db"}}, []string{"localhost/web:1", "quay.io/team/db:1"}},
		{"label key", map[string][]string{"label": {"tier"}}, []string{"localhost/web:1", "localhost/web:2", "quay.io/team/db:1"}},
		{"label value", map[string][]string{"label": {"tier=web"}}, []string{"localhost/web:1", "localhost/web:2"}},
		{"labels all hold", map[string][]string{"label": {"tier=web", "env=prod"}}, []string{"localhost/web:1"}},
		{"label negated", map[string][]string{"label!": {"env=dev"}, "label": {"tier"}}, []string{"localhost/web:1", "quay.io/team/db:1"}},
		{"dangling", map[string][]string{"dangling": {"true"}}, []string{}},
		{"not dangling", map[string][]string{"dangling": {"false"}}, []string{"localhost/web:1", "localhost/web:2", "quay.io/team/db:1"}},
		{"before", map[string][]string{"before": {"web:2"}}, []string{"localhost/web:1"}},
		{"since", map[string][]string{"since": {"web:2"}}, []string{"quay.io/team/db:1"}},
		{"id", map[string][]string{"id": {idOf["localhost/web:2"][:10]}}, []string{"localhost/web:2"}},
		{"until", map[string][]string{"until": {t0.Add(30 * time.Minute).Format(time.RFC3339)}}, []string{"localhost/web:1"}},
		// Several values of one filter: any may match; different filters: all.
		{"id alternatives", map[string][]string{"id": {idOf["localhost/web:2"][:10], idOf["quay.io/team/db:1"][:10]}}, []string{"localhost/web:2", "quay.io/team/db:1"}},
		{"before alternatives", map[string][]string{"before": {"web:2", "quay.io/team/db:1"}}, []string{"localhost/web:1", "localhost/web:2"}},
		{"since alternatives", map[string][]string{"since": {"web:1", "web:2"}}, []string{"localhost/web:2", "quay.io/team/db:1"}},
		{"dangling both", map[string][]string{"dangling": {"true", "false"}}, []string{"localhost/web:1", "localhost/web:2", "quay.io/team/db:1"}},
		{"label! all hold", map[string][]string{"label!": {"env=dev", "env=prod"}}, []string{"quay.io/team/db:1"}},
		{"alternatives and another filter", map[string][]string{"reference": {"web:1", "web:2"}, "label": {"env=prod"}}, []string{"localhost/web:1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := tagsOf(e.list(filtersQuery(c.filters)))
			sort.Strings(got)
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
	// The untagged image is dangling.
	if d := e.list(filtersQuery(map[string][]string{"dangling": {"true"}, "label!": {"tier"}})); len(d) != 1 || !d[0].Dangling {
		t.Errorf("dangling filter: %+v", d)
	}

	bad := []string{
		"?filters=" + url.QueryEscape(`{"reference":`),
		"?filters=" + url.QueryEscape(`["reference"]`),
		"?filters=" + url.QueryEscape(`{"reference":[1]}`),
		filtersQuery(map[string][]string{"colour": {"blue"}}),
		filtersQuery(map[string][]string{"dangling": {"perhaps"}}),
		filtersQuery(map[string][]string{"before": {"absent:1"}}),
		filtersQuery(map[string][]string{"since": {"BAD"}}),
		filtersQuery(map[string][]string{"until": {"yesterday"}}),
		filtersQuery(map[string][]string{"reference": {""}}),
		filtersQuery(map[string][]string{"label": {""}}),
	}
	for _, q := range bad {
		e.do(http.MethodGet, "/libpod/images/json"+q, nil).engineError(t, http.StatusBadRequest)
	}
}

func TestHistoryTreeResolve(t *testing.T) {
	e := startEngine(t)
	e.load(testimage.Image{RepoTags: []string{"localhost/layers:1"}, Comment: "built for tests", Layers: []testimage.Layer{
		{Files: []testimage.File{{Path: "a", Data: []byte("a")}}},
		{Files: []testimage.File{{Path: "b", Data: []byte("b")}}},
	}})
	var history []struct {
		ID        string `json:"Id"`
		Created   int64
		CreatedBy string
		Tags      []string
		Size      int64
		Comment   string
	}
	e.do(http.MethodGet, "/libpod/images/layers:1/history", nil).expect(t, http.StatusOK).json(t, &history)
	if len(history) != 4 {
		t.Fatalf("history has %d entries, want 4: %+v", len(history), history)
	}
	if len(history[0].ID) != 64 || len(history[0].Tags) != 0 || history[0].Comment != "built for tests" || history[0].Size != 0 {
		t.Errorf("newest entry %+v", history[0])
	}
	if history[3].CreatedBy != "testimage busybox base" || history[3].Size < 1_000_000 || history[1].ID != "<missing>" || history[0].Created != testimage.DefaultCreated.Unix() {
		t.Errorf("history %+v", history)
	}

	var tree struct{ Tree string }
	e.do(http.MethodGet, "/libpod/images/layers:1/tree", nil).expect(t, http.StatusOK).json(t, &tree)
	lines := strings.Split(strings.TrimSpace(tree.Tree), "\n")
	if len(lines) != 7 || !strings.HasPrefix(lines[0], "Image ID: ") || lines[1] != "Tags:     [localhost/layers:1]" ||
		lines[3] != "Image Layers" || !strings.HasPrefix(lines[4], "├── ID: ") || !strings.HasPrefix(lines[6], "└── ID: ") ||
		!strings.HasSuffix(lines[6], "Top Layer of: [localhost/layers:1]") {
		t.Errorf("tree:\n%s", tree.Tree)
	}

	var resolved struct{ Names []string }
	e.do(http.MethodGet, "/libpod/images/layers:1/resolve", nil).expect(t, http.StatusOK).json(t, &resolved)
	if len(resolved.Names) == 0 || resolved.Names[0] != "localhost/layers:1" {
		t.Errorf("resolve: %v", resolved.Names)
	}
	e.do(http.MethodGet, "/libpod/images/quay.io/x/y/resolve", nil).expect(t, http.StatusOK).json(t, &resolved)
	if strings.Join(resolved.Names, ",") != "quay.io/x/y:latest" {
		t.Errorf("resolve qualified: %v", resolved.Names)
	}
}

func TestRemoveAndPrune(t *testing.T) {
	e := startEngine(t)
	e.load(busybox("localhost/one:1"), labelled("localhost/two:1", testimage.DefaultCreated, map[string]string{"keep": "no"}),
		labelled("localhost/three:1", testimage.DefaultCreated, map[string]string{"keep": "yes"}))
	e.do(http.MethodPost, "/libpod/images/one:1/tag?repo=one&tag=2", nil).expect(t, http.StatusCreated)

	type report struct {
		Deleted, Untagged, Errors []string
		ExitCode                  int
	}
	// A tag among several is only untagged.
	var r report
	e.do(http.MethodDelete, "/libpod/images/one:2", nil).expect(t, http.StatusOK).json(t, &r)
	if len(r.Deleted) != 0 || strings.Join(r.Untagged, ",") != "localhost/one:2" {
		t.Errorf("rmi one:2: %+v", r)
	}
	// By ID with several tags needs force.
	e.do(http.MethodPost, "/libpod/images/one:1/tag?repo=one&tag=3", nil).expect(t, http.StatusCreated)
	one := e.list(filtersQuery(map[string][]string{"reference": {"one"}}))[0]
	e.do(http.MethodDelete, "/libpod/images/"+one.ID, nil).engineError(t, http.StatusConflict)
	e.do(http.MethodDelete, "/libpod/images/"+one.ID+"?force=true", nil).expect(t, http.StatusOK).json(t, &r)
	if strings.Join(r.Deleted, ",") != one.ID || len(r.Untagged) != 2 {
		t.Errorf("forced rmi by ID: %+v", r)
	}

	// Batch removal reports per-image failures in the body.
	e.do(http.MethodDelete, "/libpod/images/remove?images=absent&images=two:1", nil).expect(t, http.StatusOK).json(t, &r)
	if r.ExitCode != 1 || len(r.Errors) != 1 || len(r.Deleted) != 1 {
		t.Errorf("batch remove: %+v", r)
	}
	e.do(http.MethodDelete, "/libpod/images/remove?images=absent&ignore=true", nil).expect(t, http.StatusOK).json(t, &r)
	if r.ExitCode != 0 || len(r.Errors) != 0 {
		t.Errorf("batch remove with ignore: %+v", r)
	}

	// Prune: nothing dangling yet; untag three, then the default prune takes it.
	if pruned := e.prune(""); len(pruned) != 0 {
		t.Errorf("prune removed %+v with nothing dangling", pruned)
	}
	e.do(http.MethodPost, "/libpod/images/three:1/untag", nil).expect(t, http.StatusCreated)
	if pruned := e.prune("?filters=" + url.QueryEscape(`{"label":["keep=no"]}`)); len(pruned) != 0 {
		t.Errorf("label filter did not hold back the image: %+v", pruned)
	}
	if pruned := e.prune(""); len(pruned) != 1 || pruned[0].Size < 1_000_000 {
		t.Errorf("prune: %+v", pruned)
	}
	if n := len(e.list("?all=true")); n != 0 {
		t.Errorf("%d images left", n)
	}
	e.do(http.MethodPost, "/libpod/images/prune?filters="+url.QueryEscape(`{"colour":["x"]}`), nil).engineError(t, http.StatusBadRequest)
}

func TestPruneAllAndRemoveAll(t *testing.T) {
	e := startEngine(t)
	e.load(busybox("localhost/a:1"), labelled("localhost/b:1", testimage.DefaultCreated, map[string]string{"x": "y"}))
	if pruned := e.prune("?all=true&filters=" + url.QueryEscape(`{"label":["x=y"]}`)); len(pruned) != 1 || len(e.list("")) != 1 {
		t.Errorf("prune all with label: %+v", pruned)
	}
	var r struct {
		Deleted  []string
		ExitCode int
	}
	e.do(http.MethodDelete, "/libpod/images/remove?all=true", nil).expect(t, http.StatusOK).json(t, &r)
	if len(r.Deleted) != 1 || r.ExitCode != 0 || len(e.list("?all=true")) != 0 {
		t.Errorf("remove all: %+v", r)
	}
}

// TestConcurrentListingsDuringChanges: listings and inspections stay correct
// while other requests tag, untag and remove images.
func TestConcurrentListingsDuringChanges(t *testing.T) {
	e := startEngine(t)
	var images []testimage.Image
	for i := 0; i < 8; i++ {
		images = append(images, labelled(fmt.Sprintf("localhost/conc-%d:1", i), testimage.DefaultCreated, map[string]string{"n": fmt.Sprint(i)}))
	}
	e.load(images...)
	errs := make(chan error, 64)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				r := e.do(http.MethodGet, "/libpod/images/json", nil)
				if r.status != http.StatusOK {
					errs <- fmt.Errorf("list: %d %s", r.status, r.body)
					return
				}
				if r := e.do(http.MethodGet, "/libpod/images/conc-0:1/json", nil); r.status != http.StatusOK {
					errs <- fmt.Errorf("inspect: %d %s", r.status, r.body)
					return
				}
			}
		}()
	}
	for i := 0; i < 20; i++ {
		e.do(http.MethodPost, fmt.Sprintf("/libpod/images/conc-1:1/tag?repo=moving&tag=%d", i), nil).expect(t, http.StatusCreated)
		e.do(http.MethodPost, fmt.Sprintf("/libpod/images/conc-1:1/untag?repo=localhost/moving&tag=%d", i), nil).expect(t, http.StatusCreated)
	}
	for i := 2; i < 8; i++ {
		e.do(http.MethodDelete, fmt.Sprintf("/libpod/images/conc-%d:1", i), nil).expect(t, http.StatusOK)
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got := tagsOf(e.list(""))
	sort.Strings(got)
	if strings.Join(got, ",") != "localhost/conc-0:1,localhost/conc-1:1" {
		t.Errorf("images at the end: %v", got)
	}
}

// parentAndChild are two images where the second is built on the first.
func parentAndChild() []testimage.Image {
	return []testimage.Image{
		{RepoTags: []string{"localhost/parent:1"}, BareHistory: true},
		{RepoTags: []string{"localhost/child:1"}, BareHistory: true, Layers: []testimage.Layer{{Files: []testimage.File{{Path: "c", Data: []byte("c")}}}}},
	}
}

// TestIntermediateImages: an untagged parent is intermediate (listed only with
// all, not dangling, not pruned); removing its last child removes it too.
func TestIntermediateImages(t *testing.T) {
	e := startEngine(t)
	e.load(parentAndChild()...)
	byName := map[string]summary{}
	for _, s := range e.list("") {
		byName[s.Names[0]] = s
	}
	parent, child := byName["localhost/parent:1"], byName["localhost/child:1"]
	if child.ParentID != parent.ID || parent.ParentID != "" {
		t.Fatalf("parent %+v, child %+v", parent, child)
	}
	var inspect struct{ Parent string }
	e.do(http.MethodGet, "/libpod/images/child:1/json", nil).expect(t, http.StatusOK).json(t, &inspect)
	if inspect.Parent != parent.ID {
		t.Errorf("inspect Parent %q, want %s", inspect.Parent, parent.ID)
	}

	e.do(http.MethodPost, "/libpod/images/parent:1/untag", nil).expect(t, http.StatusCreated)
	if got := e.list(""); len(got) != 1 || got[0].ID != child.ID {
		t.Errorf("without all: %+v", got)
	}
	if got := e.list("?all=true"); len(got) != 2 {
		t.Errorf("with all: %d images", len(got))
	}
	if got := e.list("?all=true&" + filtersQuery(map[string][]string{"intermediate": {"true"}})[1:]); len(got) != 1 || got[0].ID != parent.ID || got[0].Dangling {
		t.Errorf("intermediate filter: %+v", got)
	}
	if pruned := e.prune(""); len(pruned) != 0 {
		t.Errorf("prune took an intermediate image: %+v", pruned)
	}

	var r struct {
		Deleted  []string
		Untagged []string
	}
	e.do(http.MethodDelete, "/libpod/images/child:1", nil).expect(t, http.StatusOK).json(t, &r)
	sort.Strings(r.Deleted)
	want := []string{parent.ID, child.ID}
	sort.Strings(want)
	if strings.Join(r.Deleted, ",") != strings.Join(want, ",") {
		t.Errorf("removing the child deleted %v, want %v", r.Deleted, want)
	}
	if n := len(e.list("?all=true")); n != 0 {
		t.Errorf("%d images left", n)
	}
}

// TestRemoveAllWithParents: all=true removes children before parents and
// reports every image deleted, without errors for parents already gone.
func TestRemoveAllWithParents(t *testing.T) {
	e := startEngine(t)
	e.load(parentAndChild()...)
	e.load(busybox("localhost/other:1"))
	var r struct {
		Deleted  []string
		Errors   []string
		ExitCode int
	}
	e.do(http.MethodDelete, "/libpod/images/remove?all=true", nil).expect(t, http.StatusOK).json(t, &r)
	if len(r.Deleted) != 3 || r.ExitCode != 0 || len(r.Errors) != 0 {
		t.Errorf("remove all: %+v", r)
	}
	if n := len(e.list("?all=true")); n != 0 {
		t.Errorf("%d images left", n)
	}
}
