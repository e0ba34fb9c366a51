package imagesapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/images/imagestore/registrytest"
	"github.com/berth-project/berth/engine/internal/testsupport/need"
	"github.com/berth-project/berth/engine/internal/testsupport/tartest"
	"github.com/berth-project/berth/engine/testimage"
)

// listManifest is the part of a manifest list or OCI index the tests read.
type listManifest struct {
	MediaType string `json:"mediaType"`
	Manifests []struct {
		MediaType   string            `json:"mediaType"`
		Digest      string            `json:"digest"`
		Size        int64             `json:"size"`
		Annotations map[string]string `json:"annotations"`
		Platform    struct {
			Architecture string   `json:"architecture"`
			OS           string   `json:"os"`
			OSVersion    string   `json:"os.version"`
			Variant      string   `json:"variant"`
			Features     []string `json:"features"`
		} `json:"platform"`
	} `json:"manifests"`
	Annotations map[string]string `json:"annotations"`
}

// instance returns the entry for an architecture.
func (l listManifest) instance(t *testing.T, arch string) (digest string, annotations map[string]string) {
	t.Helper()
	for _, m := range l.Manifests {
		if m.Platform.Architecture == arch {
			return m.Digest, m.Annotations
		}
	}
	t.Fatalf("no %s instance in %+v", arch, l)
	return "", nil
}

// importArch imports a one-file image for another architecture.
func (e *testEngine) importArch(t *testing.T, name, arch string) string {
	t.Helper()
	layer := tartest.Of(t, "arch", "built for "+arch)
	var report struct {
		ID string `json:"Id"`
	}
	e.do(http.MethodPost, "/v4.3.1/libpod/images/import?reference="+url.QueryEscape(name)+"&architecture="+arch, bytes.NewReader(layer)).
		expect(t, http.StatusOK).json(t, &report)
	return report.ID
}

// inspectList reads a list through ManifestInspect.
func (e *testEngine) inspectList(t *testing.T, name string) listManifest {
	t.Helper()
	var l listManifest
	e.do(http.MethodGet, "/v4.3.1/libpod/manifests/"+url.PathEscape(name)+"/json", nil).expect(t, http.StatusOK).json(t, &l)
	return l
}

// skopeoRaw returns skopeo inspect --raw of a registry reference.
func skopeoRaw(t *testing.T, ref string) []byte {
	t.Helper()
	skopeo := need.Program(t, "image tests", "skopeo")
	out, err := exec.CommandContext(withTimeout(t, time.Minute), skopeo, "inspect", "--raw", "--tls-verify=false", "docker://"+ref).Output()
	if err != nil {
		t.Fatalf("skopeo inspect %s: %v", ref, err)
	}
	return out
}

// TestPodmanRemoteManifestLists drives manifest lists with podman 4.3.1's
// client: create, add local images with platform and annotation flags,
// inspect, exists, remove an instance, push --all to a real registry (read
// back with skopeo), pull the list back (this platform's instance), rm; and
// annotate through the API (4.3.1's remote annotate fails in the client).
func TestPodmanRemoteManifestLists(t *testing.T) {
	e, p, reg := startWithRegistry(t, "localhost/mlbase:1")
	baseID := e.list(filtersQuery(map[string][]string{"reference": {"localhost/mlbase:1"}}))[0].ID
	e.importArch(t, "localhost/mlbase:arm", "arm64")

	listID := strings.TrimSpace(p.run("manifest", "create", "mlist"))
	if len(listID) != 64 {
		t.Fatalf("manifest create answered %q", listID)
	}
	empty := e.inspectList(t, "mlist")
	if empty.MediaType != "application/vnd.docker.distribution.manifest.list.v2+json" || len(empty.Manifests) != 0 {
		t.Errorf("an empty list: %+v", empty)
	}
	p.run("manifest", "exists", "mlist")
	if _, _, err := p.try("manifest", "exists", "nosuchlist"); err == nil {
		t.Error("manifest exists of an unknown list succeeded")
	}

	p.run("manifest", "add", "mlist", "containers-storage:localhost/mlbase:1")
	p.run("manifest", "add", "--arch", "arm64", "--os", "linux", "--annotation", "team=arm", "mlist", "localhost/mlbase:arm")
	var shown listManifest
	if err := json.Unmarshal([]byte(p.run("manifest", "inspect", "mlist")), &shown); err != nil || len(shown.Manifests) != 2 {
		t.Fatalf("podman manifest inspect: %+v (%v)", shown, err)
	}
	l := e.inspectList(t, "mlist")
	if l.MediaType != "application/vnd.oci.image.index.v1+json" {
		t.Errorf("a list with annotations is served as %s", l.MediaType)
	}
	armDigest, armAnnotations := l.instance(t, "arm64")
	if armAnnotations["team"] != "arm" {
		t.Errorf("arm64 annotations: %v", armAnnotations)
	}
	amdDigest, _ := l.instance(t, hostArch())

	// podman 4.3.1's remote annotate fails in its client, so the API is used.
	body := `{"operation":"annotate","images":["` + amdDigest + `"],"annotations":{"role":"main"},"os_version":"1.0"}`
	e.do(http.MethodPut, "/v4.3.1/libpod/manifests/mlist", strings.NewReader(body)).expect(t, http.StatusOK)
	_, amdAnnotations := e.inspectList(t, "mlist").instance(t, hostArch())
	if amdAnnotations["role"] != "main" {
		t.Errorf("annotate: %v", amdAnnotations)
	}

	var rows []map[string]any
	e.do(http.MethodGet, "/v4.3.1/libpod/images/json", nil).expect(t, http.StatusOK).json(t, &rows)
	found := false
	for _, row := range rows {
		if id, _ := row["Id"].(string); id == listID {
			found = row["IsManifestList"] == true
		} else if row["IsManifestList"] == true {
			t.Errorf("image %v is marked as a list", row["Names"])
		}
	}
	if !found {
		t.Errorf("images does not list %s with IsManifestList: %v", listID, rows)
	}

	dest := reg.Host + "/mlist:1"
	p.run("manifest", "push", "--all", "--tls-verify=false", "mlist", "docker://"+dest)
	var pushed listManifest
	if err := json.Unmarshal(skopeoRaw(t, dest), &pushed); err != nil {
		t.Fatal(err)
	}
	if len(pushed.Manifests) != 2 || pushed.MediaType != "application/vnd.oci.image.index.v1+json" {
		t.Fatalf("registry has %+v", pushed)
	}
	if _, a := pushed.instance(t, "arm64"); a["team"] != "arm" {
		t.Errorf("pushed arm64 annotations: %v", a)
	}

	p.run("manifest", "remove", "mlist", armDigest)
	if after := e.inspectList(t, "mlist"); len(after.Manifests) != 1 {
		t.Errorf("after remove: %+v", after)
	}
	if _, stderr, err := p.try("manifest", "create", "localhost/mlbase:arm"); err == nil || !strings.Contains(stderr, "in use") {
		t.Errorf("a list named like an image: %v %s", err, stderr)
	}
	p.run("manifest", "rm", "mlist")
	if _, _, err := p.try("manifest", "exists", "mlist"); err == nil {
		t.Error("the list survived manifest rm")
	}
	for _, row := range e.list("") {
		if row.ID == listID {
			t.Error("images still lists the removed list")
		}
	}

	// Pulling the list picks this platform's instance.
	p.run("rmi", "localhost/mlbase:1")
	pulled := strings.TrimSpace(p.run("pull", "-q", "--tls-verify=false", dest))
	if pulled != baseID {
		t.Errorf("pulling the list gave %s, want this platform's image %s", pulled, baseID)
	}
}

// hostArch is the engine's architecture as images record it.
func hostArch() string { return runtime.GOARCH }

// TestManifestListRegistryInstances adds registry images (docker://) to
// lists: one platform's instance of a registry list by default, all of them
// with all, and creates a list from a registry image in one request.
func TestManifestListRegistryInstances(t *testing.T) {
	e := startEngine(t)
	reg := registrytest.Start(t, registrytest.Options{})
	e.load(testimage.Busybox("localhost/regbase:1"))
	e.importArch(t, "localhost/regbase:arm", "arm64")
	api := "/v4.3.1/libpod/manifests/"
	e.do(http.MethodPost, api+"src?images=containers-storage:localhost/regbase:1", nil).expect(t, http.StatusCreated)
	e.do(http.MethodPut, api+"src", strings.NewReader(`{"operation":"update","images":["localhost/regbase:arm"]}`)).expect(t, http.StatusOK)
	var report struct {
		ID string `json:"Id"`
	}
	e.do(http.MethodPost, api+"src/registry/"+url.PathEscape(reg.Host+"/src:1")+"?all=true&tlsVerify=false", nil).expect(t, http.StatusOK).json(t, &report)
	if !strings.HasPrefix(report.ID, "sha256:") {
		t.Fatalf("push answered %+v", report)
	}

	e.do(http.MethodPost, api+"one?tlsVerify=false&images="+url.QueryEscape("docker://"+reg.Host+"/src:1"), nil).expect(t, http.StatusCreated)
	one := e.inspectList(t, "one")
	if len(one.Manifests) != 1 || one.Manifests[0].Platform.Architecture != hostArch() {
		t.Errorf("a registry list without all adds this platform's instance: %+v", one)
	}
	e.do(http.MethodPost, api+"every?all=true&tlsVerify=false&images="+url.QueryEscape("docker://"+reg.Host+"/src:1"), nil).expect(t, http.StatusCreated)
	if every := e.inspectList(t, "every"); len(every.Manifests) != 2 {
		t.Errorf("all adds every instance: %+v", every)
	}
	// A list of registry instances pushes to another repository.
	e.do(http.MethodPost, api+"every/registry/"+url.PathEscape(reg.Host+"/copy:1")+"?all=true&tlsVerify=false", nil).expect(t, http.StatusOK)
	var copied listManifest
	if err := json.Unmarshal(skopeoRaw(t, reg.Host+"/copy:1"), &copied); err != nil || len(copied.Manifests) != 2 {
		t.Errorf("pushed copy: %+v (%v)", copied, err)
	}
	// Without all only the list goes: its instances are already in the
	// destination repository.
	e.do(http.MethodPost, api+"every/registry/"+url.PathEscape(reg.Host+"/src:listonly")+"?tlsVerify=false", nil).expect(t, http.StatusOK)
	var listOnly listManifest
	if err := json.Unmarshal(skopeoRaw(t, reg.Host+"/src:listonly"), &listOnly); err != nil || len(listOnly.Manifests) != 2 {
		t.Errorf("list pushed without all: %+v (%v)", listOnly, err)
	}
	// A list only in the registry is inspected there.
	var remote listManifest
	e.do(http.MethodGet, api+url.PathEscape(reg.Host+"/src:1")+"/json?tlsVerify=false", nil).expect(t, http.StatusOK).json(t, &remote)
	if len(remote.Manifests) != 2 {
		t.Errorf("registry list inspect: %+v", remote)
	}
}

// TestManifestListV3Routes checks the superseded v3 forms, chosen by the
// path's version.
func TestManifestListV3Routes(t *testing.T) {
	e := startEngine(t)
	reg := registrytest.Start(t, registrytest.Options{})
	e.load(testimage.Busybox("localhost/v3base:1"))
	v3 := "/v3.4.0/libpod/manifests/"
	var created struct {
		ID string `json:"Id"`
	}
	// Podman's ManifestCreate answers 200 on 3.x paths (201 from 4.0 on).
	e.do(http.MethodPost, v3+"create?name=v3list", nil).expect(t, http.StatusOK).json(t, &created)
	e.do(http.MethodPost, v3+"v3list/add", strings.NewReader(`{"images":["localhost/v3base:1"],"annotation":["a=b"]}`)).expect(t, http.StatusOK)
	l := e.inspectList(t, "v3list")
	if len(l.Manifests) != 1 || l.Manifests[0].Annotations["a"] != "b" {
		t.Fatalf("after v3 add: %+v", l)
	}
	var pushed struct {
		ID string `json:"Id"`
	}
	e.do(http.MethodPost, v3+"v3list/push?all=true&tlsVerify=false&destination="+url.QueryEscape(reg.Host+"/v3list:1"), nil).expect(t, http.StatusOK).json(t, &pushed)
	if !strings.HasPrefix(pushed.ID, "sha256:") {
		t.Errorf("v3 push answered %+v", pushed)
	}
	e.do(http.MethodPut, v3+"v3list", strings.NewReader(`{"operation":"remove"}`)).engineError(t, http.StatusNotFound)
	e.do(http.MethodDelete, v3+"v3list?digest="+l.Manifests[0].Digest, nil).expect(t, http.StatusOK)
	if after := e.inspectList(t, "v3list"); len(after.Manifests) != 0 {
		t.Errorf("v3 remove digest left %+v", after)
	}
	// The v4 DELETE removes the list itself.
	e.do(http.MethodDelete, "/v4.0.0/libpod/manifests/v3list", nil).expect(t, http.StatusOK)
	e.do(http.MethodGet, v3+"v3list/exists", nil).engineError(t, http.StatusNotFound)
}

// TestManifestListBadInput checks the 4xx answers.
func TestManifestListBadInput(t *testing.T) {
	e := startEngine(t)
	reg := registrytest.Start(t, registrytest.Options{})
	e.load(testimage.Busybox("localhost/badbase:1"))
	api := "/v4.3.1/libpod/manifests/"
	e.do(http.MethodPost, api+"bad", nil).expect(t, http.StatusCreated)
	for _, c := range []struct {
		name, method, path, body string
		want                     int
	}{
		{"unknown list inspect", http.MethodGet, api + "nolist/json", "", http.StatusNotFound},
		{"unknown list exists", http.MethodGet, api + "nolist/exists", "", http.StatusNotFound},
		{"unknown list in the registry", http.MethodGet, api + url.PathEscape(reg.Host+"/nolist:1") + "/json?tlsVerify=false", "", http.StatusNotFound},
		{"plain image is not a list", http.MethodGet, api + "localhost%2Fbadbase:1/exists", "", http.StatusNotFound},
		{"unknown list modify", http.MethodPut, api + "nolist", `{"operation":"update","images":["localhost/badbase:1"]}`, http.StatusNotFound},
		{"unknown list delete", http.MethodDelete, api + "nolist", "", http.StatusNotFound},
		{"missing local instance", http.MethodPut, api + "bad", `{"operation":"update","images":["containers-storage:localhost/nothere:1"]}`, http.StatusNotFound},
		{"missing registry instance", http.MethodPut, api + "bad?tlsVerify=false", `{"operation":"update","images":["docker://` + reg.Host + `/nothere:1"]}`, http.StatusNotFound},
		{"digest not in list", http.MethodPut, api + "bad", `{"operation":"remove","images":["sha256:` + strings.Repeat("0", 64) + `"]}`, http.StatusNotFound},
		{"annotate digest not in list", http.MethodPut, api + "bad", `{"operation":"annotate","images":["sha256:` + strings.Repeat("1", 64) + `"],"annotations":{"a":"b"}}`, http.StatusNotFound},
		{"malformed digest", http.MethodPut, api + "bad", `{"operation":"remove","images":["sha256:xyz"]}`, http.StatusBadRequest},
		{"unknown operation", http.MethodPut, api + "bad", `{"operation":"explode"}`, http.StatusBadRequest},
		{"unknown field", http.MethodPut, api + "bad", `{"operation":"update","colour":"red"}`, http.StatusBadRequest},
		{"artifact instance", http.MethodPut, api + "bad", `{"operation":"update","artifact_files":["/etc/hosts"]}`, http.StatusBadRequest},
		{"bad annotation", http.MethodPut, api + "bad", `{"operation":"annotate","annotation":["novalue"]}`, http.StatusBadRequest},
		{"name in use by an image", http.MethodPost, api + "localhost%2Fbadbase:1", "", http.StatusConflict},
		{"name in use by a list", http.MethodPost, api + "bad", "", http.StatusConflict},
		{"invalid list name", http.MethodPost, api + "Bad%20Name", "", http.StatusBadRequest},
		{"push destination transport", http.MethodPost, api + "bad/registry/" + url.PathEscape("oci:/tmp/x"), "", http.StatusBadRequest},
		{"push unknown list", http.MethodPost, api + "nolist/registry/" + url.PathEscape(reg.Host+"/x:1") + "?tlsVerify=false", "", http.StatusNotFound},
		{"v4 has no v3 add", http.MethodPut, "/v3.0.0/libpod/manifests/bad", `{"operation":"remove"}`, http.StatusNotFound},
		{"v3 remove without digest", http.MethodDelete, "/v3.0.0/libpod/manifests/bad", "", http.StatusBadRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			e.do(c.method, c.path, strings.NewReader(c.body)).engineError(t, c.want)
		})
	}
	// amend returns the existing list; ignore makes a missing list no error.
	e.do(http.MethodPost, api+"bad?amend=true", nil).expect(t, http.StatusCreated)
	e.do(http.MethodDelete, api+"nolist?ignore=true", nil).expect(t, http.StatusOK)
	// rmi removes a list like an image.
	e.do(http.MethodPost, api+"rmilist", nil).expect(t, http.StatusCreated)
	e.do(http.MethodDelete, "/v4.3.1/libpod/images/rmilist", nil).expect(t, http.StatusOK)
	e.do(http.MethodGet, api+"rmilist/exists", nil).engineError(t, http.StatusNotFound)
	// manifest rm (images/remove with lookupmanifest) refuses a plain image.
	var report struct {
		ExitCode int
		Errors   []string
	}
	e.do(http.MethodDelete, "/v4.3.1/libpod/images/remove?lookupmanifest=true&images=localhost/badbase:1", nil).expect(t, http.StatusOK).json(t, &report)
	if report.ExitCode != 1 || len(report.Errors) != 1 {
		t.Errorf("manifest rm of an image: %+v", report)
	}
	// A failed create with instances leaves no list behind.
	e.do(http.MethodPost, api+"halfmade?images=containers-storage:localhost/nothere:1", nil).engineError(t, http.StatusNotFound)
	e.do(http.MethodGet, api+"halfmade/exists", nil).engineError(t, http.StatusNotFound)
}

// TestManifestListSurvivesKill checks that a list is an ordinary image of
// the store: it is there, whole, after the engine is killed.
func TestManifestListSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the engine binary")
	}
	p := startProcess(t)
	post(t, p.Base()+"/v4.3.1/libpod/manifests/killed", http.StatusCreated)
	p.Kill9()
	p.Start()
	body := get(t, p.Base()+"/v4.3.1/libpod/manifests/killed/json", http.StatusOK)
	var l listManifest
	if err := json.Unmarshal(body, &l); err != nil || l.MediaType == "" {
		t.Fatalf("after kill: %s (%v)", body, err)
	}
	deleteReq(t, p.Base()+"/v4.3.1/libpod/manifests/killed", http.StatusOK)
	get(t, p.Base()+"/v4.3.1/libpod/manifests/killed/exists", http.StatusNotFound)
}

// TestPodmanRemoteManifestPlatformFields: podman 4.3.1's manifest add with
// every platform flag and an annotation, on a list whose name carries a
// registry host and slashes; inspect (podman's and the API's) shows them;
// the list is pushed through a path with unescaped slashes and a docker://
// destination, and the registry holds the OCI index with them (Podman 5's
// format: features have no place in an index). A list with features and no
// annotations is pushed as a Docker list, which carries them. Create
// answers 201 on 4.x paths, 200 on 3.x and unversioned ones.
func TestPodmanRemoteManifestPlatformFields(t *testing.T) {
	e, p, reg := startWithRegistry(t, "localhost/platbase:1")

	name := reg.Host + "/team/plat:1"
	p.run("manifest", "create", name)
	p.run("manifest", "add", "--annotation", "team=arm", "--os-version", "10.0", "--features", "sse4",
		"--variant", "v8", "--os", "linux", "--arch", "arm64", name, "localhost/platbase:1")
	var shown listManifest
	platformOK := func(what string, withFeatures bool) {
		t.Helper()
		if len(shown.Manifests) != 1 {
			t.Fatalf("%s: %+v", what, shown)
		}
		pl := shown.Manifests[0].Platform
		if pl.Architecture != "arm64" || pl.OS != "linux" || pl.OSVersion != "10.0" || pl.Variant != "v8" ||
			(withFeatures && (len(pl.Features) != 1 || pl.Features[0] != "sse4")) {
			t.Errorf("%s platform: %+v", what, pl)
		}
	}
	// podman 4.3.1 decodes inspect as a Docker list: annotations are not shown.
	if err := json.Unmarshal([]byte(p.run("manifest", "inspect", name)), &shown); err != nil {
		t.Fatal(err)
	}
	platformOK("podman manifest inspect", true)
	e.do(http.MethodGet, "/v4.3.1/libpod/manifests/"+name+"/json", nil).expect(t, http.StatusOK).json(t, &shown)
	platformOK("ManifestInspect", true)
	if shown.MediaType != "application/vnd.oci.image.index.v1+json" || shown.Manifests[0].Annotations["team"] != "arm" {
		t.Errorf("ManifestInspect: %+v", shown)
	}

	// Without tls-verify=false the plain-HTTP registry is refused, naming TLS.
	if _, stderr, err := p.try("manifest", "push", "--all", name, "docker://"+reg.Host+"/team/refused:1"); err == nil || !strings.Contains(stderr, "HTTP response to HTTPS client") {
		t.Errorf("manifest push to a plain-HTTP registry without --tls-verify=false: %v %s", err, stderr)
	}
	e.do(http.MethodPost, "/v4.3.1/libpod/manifests/"+name+"/registry/"+reg.Host+"/team/refused:1?all=true&quiet=false", nil).engineError(t, http.StatusBadRequest)

	// Unescaped slashes in the list's name and a docker:// destination.
	pushedName := reg.Host + "/team/pushed:1"
	var pushed struct {
		ID string `json:"Id"`
	}
	e.do(http.MethodPost, "/v4.3.1/libpod/manifests/"+name+"/registry/docker://"+pushedName+"?all=true&tlsVerify=false", nil).
		expect(t, http.StatusOK).json(t, &pushed)
	raw := skopeoRaw(t, pushedName)
	if pushed.ID != "sha256:"+sha256Hex(raw) {
		t.Errorf("push answered %s for a list whose digest is %s", pushed.ID, sha256Hex(raw))
	}
	shown.Manifests = nil
	if err := json.Unmarshal(raw, &shown); err != nil {
		t.Fatal(err)
	}
	platformOK("pushed index", false)
	if shown.MediaType != "application/vnd.oci.image.index.v1+json" || shown.Manifests[0].Annotations["team"] != "arm" {
		t.Errorf("pushed: %s", raw)
	}

	p.run("manifest", "create", "featlist")
	p.run("manifest", "add", "--features", "sse4", "--os-version", "10.0", "--variant", "v8", "--arch", "arm64", "featlist", "localhost/platbase:1")
	e.do(http.MethodPost, "/v4.3.1/libpod/manifests/featlist/registry/"+reg.Host+"/team/feat:1?all=true&tlsVerify=false", nil).expect(t, http.StatusOK)
	shown.Manifests = nil
	if err := json.Unmarshal(skopeoRaw(t, reg.Host+"/team/feat:1"), &shown); err != nil {
		t.Fatal(err)
	}
	platformOK("pushed Docker list", true)
	if shown.MediaType != "application/vnd.docker.distribution.manifest.list.v2+json" {
		t.Errorf("a list with features only pushed as %s", shown.MediaType)
	}

	for _, c := range []struct {
		path string
		want int
	}{
		{"/v4.3.1/libpod/manifests/created4", http.StatusCreated},
		{"/v5.0.0/libpod/manifests/created5", http.StatusCreated},
		{"/libpod/manifests/createdplain", http.StatusOK},
		{"/v3.4.0/libpod/manifests/create?name=created3", http.StatusOK},
		{"/v4.3.1/libpod/manifests/create", http.StatusCreated},
	} {
		e.do(http.MethodPost, c.path, nil).expect(t, c.want)
	}
	// On 4.x paths "create" is a list's name, as in Podman.
	e.do(http.MethodGet, "/v4.3.1/libpod/manifests/create/exists", nil).expect(t, http.StatusNoContent)
}

// sha256Hex is the hex SHA-256 of data.
func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
