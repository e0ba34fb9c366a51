package quadletsapi

import (
	"bytes"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/tartest"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

// testEngine talks to an in-process engine on a loopback listener.
type testEngine struct{ *enginetest.Engine }

// startEngine serves an engine, with the busybox test image, whose
// containers default to a private network namespace.
func startEngine(t testing.TB) *testEngine {
	t.Helper()
	return &testEngine{enginetest.Start(t, enginetest.Options{What: "quadlet API tests"})}
}

// tarOf builds a tar archive of name -> content pairs.
func tarOf(t testing.TB, files ...string) *bytes.Buffer {
	t.Helper()
	return bytes.NewBuffer(tartest.Of(t, files...))
}

// apiError is the engine's error body.
type apiError struct {
	Cause    string `json:"cause"`
	Message  string `json:"message"`
	Response int    `json:"response"`
}

// mustFail sends a request that must fail with want and a message
// containing each of parts.
func (te *testEngine) mustFail(want int, method, path string, body any, parts ...string) {
	te.T.Helper()
	status, data := te.Do(method, path, body)
	var e apiError
	if status != want || json.Unmarshal(data, &e) != nil || e.Response != want {
		te.T.Fatalf("%s %s: %d %s, want %d with the error body", method, path, status, data, want)
	}
	for _, p := range parts {
		if !strings.Contains(e.Message, p) {
			te.T.Errorf("%s %s: message %q lacks %q", method, path, e.Message, p)
		}
	}
}

const webUnit = "[Unit]\nDescription=web\n[Container]\nImage=busybox\nEnvironmentFile=web.env\nPublishPort=8080:80\n[Install]\nWantedBy=default.target\n"

// TestQuadletRoutes installs, lists, prints, checks and removes quadlets
// over HTTP, and sends every kind of bad input.
func TestQuadletRoutes(t *testing.T) {
	te := startEngine(t)
	var report struct {
		InstalledQuadlets map[string]string
		QuadletErrors     map[string]string
	}
	body := te.Must(http.StatusOK, "POST", "/quadlets", tarOf(t, "web.container", webUnit, "web.env", "A=1\n"))
	if err := json.Unmarshal(body, &report); err != nil || len(report.InstalledQuadlets) != 2 {
		t.Fatalf("install report %s", body)
	}
	installed := filepath.Join(te.Root, "quadlets", "web.container", "web.container")
	if report.InstalledQuadlets["web.container"] != installed {
		t.Fatalf("installed at %q, want %q", report.InstalledQuadlets["web.container"], installed)
	}
	te.Must(http.StatusOK, "POST", "/quadlets", tarOf(t, "db.pod", "[Pod]\nPodName=db\n"))
	te.Must(http.StatusOK, "POST", "/quadlets", tarOf(t, "data.volume", "[Volume]\n"))

	var list []struct{ Name, UnitName, Path, Status, App, Pod string }
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/quadlets/json", nil), &list)
	if len(list) != 3 {
		t.Fatalf("list: %+v", list)
	}
	units := map[string]string{}
	for _, q := range list {
		units[q.Name] = q.UnitName
	}
	if units["web.container"] != "web.service" || units["db.pod"] != "db-pod.service" || units["data.volume"] != "data-volume.service" {
		t.Fatalf("unit names %v", units)
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", `/quadlets/json?filters={"name":["^d"]}`, nil), &list)
	if len(list) != 2 {
		t.Fatalf("name filter: %+v", list)
	}
	te.mustFail(http.StatusBadRequest, "GET", `/quadlets/json?filters={"label":["x"]}`, nil, "label is not a valid filter")

	if got := string(te.Must(http.StatusOK, "GET", "/quadlets/web.container/file", nil)); got != webUnit {
		t.Fatalf("file: %q", got)
	}
	te.Must(http.StatusNoContent, "GET", "/quadlets/web.container/exists", nil)
	te.mustFail(http.StatusNotFound, "GET", "/quadlets/nope.container/exists", nil, "no such quadlet")
	te.mustFail(http.StatusNotFound, "GET", "/quadlets/nope.container/file", nil, "no such quadlet")

	// Bad input: each case is refused and installs nothing.
	// A taken name: Podman's 400 and words.
	te.mustFail(http.StatusBadRequest, "POST", "/quadlets", tarOf(t, "web.container", webUnit), "errors occurred installing some Quadlets: web.container: a Quadlet with name web.container already exists, refusing to overwrite")
	te.mustFail(http.StatusBadRequest, "POST", "/quadlets", tarOf(t, "bad.container", "[Container]\nImage=x\nImagee=y\nReadOnly=maybe\n"),
		"bad.container line 3: [Container] key Imagee: unsupported key", "bad.container line 4: [Container] key ReadOnly")
	te.mustFail(http.StatusBadRequest, "POST", "/quadlets", tarOf(t, "web.txt", "x"), "no quadlet files found")
	te.mustFail(http.StatusBadRequest, "POST", "/quadlets", tarOf(t, "a.container", "[Container]\nImage=x\n", "b.network", "[Network]\n"), "only a single quadlet file")
	te.mustFail(http.StatusBadRequest, "POST", "/quadlets", tarOf(t, "esc.container", "[Container]\nImage=x\n", "../../esc.env", "x"), "escapes the quadlet directory")
	te.mustFail(http.StatusBadRequest, "POST", "/quadlets?reload-systemd=true", tarOf(t, "r.container", "[Container]\nImage=x\n"), "no systemd runs here")
	te.mustFail(http.StatusBadRequest, "POST", "/quadlets?reloadSystemd=true", tarOf(t, "r.container", "[Container]\nImage=x\n"), "reloadSystemd")
	te.mustFail(http.StatusBadRequest, "POST", "/quadlets?replace=perhaps", tarOf(t, "r.container", "[Container]\nImage=x\n"), "replace")
	if _, err := os.Stat(filepath.Join(filepath.Dir(te.Root), "esc.env")); err == nil {
		t.Fatal("an escaping entry was written")
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/quadlets/json", nil), &list)
	if len(list) != 3 {
		t.Fatalf("a refused install left something: %+v", list)
	}

	// Multipart form data, as Podman's install takes it: each part with a
	// file name is a file, other fields are skipped.
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	mw.WriteField("note", "not a file")
	fw, _ := mw.CreateFormFile("file", "mp.container")
	fw.Write([]byte("[Container]\nImage=busybox\nEnvironmentFile=mp.env\n"))
	fw, _ = mw.CreateFormFile("file", "mp.env")
	fw.Write([]byte("B=2\n"))
	mw.Close()
	status, data := te.Raw("POST", "/quadlets", mw.FormDataContentType(), &mp)
	report.InstalledQuadlets = nil
	if err := json.Unmarshal(data, &report); status != http.StatusOK || err != nil || len(report.InstalledQuadlets) != 2 ||
		report.InstalledQuadlets["mp.env"] != filepath.Join(te.Root, "quadlets", "mp.container", "mp.env") {
		t.Fatalf("multipart install: %d %s", status, data)
	}
	if got := string(te.Must(http.StatusOK, "GET", "/quadlets/mp.container/file", nil)); !strings.Contains(got, "EnvironmentFile=mp.env") {
		t.Fatalf("multipart unit: %q", got)
	}
	te.Must(http.StatusOK, "DELETE", "/quadlets/mp.container", nil)
	for ct, want := range map[string]string{"text/plain": "text/plain is not supported", "multipart/form-data": "without a boundary"} {
		status, data := te.Raw("POST", "/quadlets", ct, strings.NewReader("x"))
		if status != http.StatusBadRequest || !strings.Contains(string(data), "Content-Type") || !strings.Contains(string(data), want) {
			t.Errorf("Content-Type %s: %d %s", ct, status, data)
		}
	}

	// Replace, then removal.
	report.InstalledQuadlets = nil
	json.Unmarshal(te.Must(http.StatusOK, "POST", "/quadlets?replace=true", tarOf(t, "web.container", "[Container]\nImage=alpine\n")), &report)
	if len(report.InstalledQuadlets) != 1 || report.InstalledQuadlets["web.container"] != installed {
		t.Fatalf("replace report: %+v", report)
	}
	if got := string(te.Must(http.StatusOK, "GET", "/quadlets/web.container/file", nil)); !strings.Contains(got, "alpine") {
		t.Fatalf("after replace: %q", got)
	}
	te.mustFail(http.StatusNotFound, "DELETE", "/quadlets/nope.container", nil, "no such quadlet")
	// With ignore a missing name is reported as removed, as Podman's report has it.
	var ignored struct {
		Removed []string
		Errors  map[string]string
	}
	json.Unmarshal(te.Must(http.StatusOK, "DELETE", "/quadlets/nope.container?ignore=true", nil), &ignored)
	if len(ignored.Removed) != 1 || ignored.Removed[0] != "nope.container" || len(ignored.Errors) != 0 {
		t.Fatalf("removal with ignore: %+v", ignored)
	}
	// The other methods on a quadlet's path: 405, as Podman's router answers.
	for _, method := range []string{"GET", "POST", "PUT", "PATCH"} {
		te.mustFail(http.StatusMethodNotAllowed, method, "/quadlets/web.container", nil, "not allowed")
	}
	te.mustFail(http.StatusMethodNotAllowed, "PUT", "/quadlets", nil, "not allowed")
	te.mustFail(http.StatusMethodNotAllowed, "POST", "/quadlets/web.container/file", nil, "not allowed")
	te.mustFail(http.StatusBadRequest, "DELETE", "/quadlets", nil, "at least 1 quadlet")
	te.mustFail(http.StatusBadRequest, "DELETE", "/quadlets?all=true&quadlets=db.pod", nil, "may not pass any quadlet names")
	var rm struct {
		Removed []string
		Errors  map[string]string
	}
	json.Unmarshal(te.Must(http.StatusOK, "DELETE", "/quadlets/web.container?force=true", nil), &rm)
	if len(rm.Removed) != 1 || rm.Removed[0] != "web.container" {
		t.Fatalf("remove: %+v", rm)
	}
	json.Unmarshal(te.Must(http.StatusOK, "DELETE", "/quadlets?quadlets=db.pod&quadlets=gone.pod", nil), &rm)
	if len(rm.Removed) != 1 || rm.Errors["gone.pod"] == "" {
		t.Fatalf("batch remove: %+v", rm)
	}
	json.Unmarshal(te.Must(http.StatusOK, "DELETE", "/quadlets?all=true", nil), &rm)
	if len(rm.Removed) != 1 || rm.Removed[0] != "data.volume" {
		t.Fatalf("remove all: %+v", rm)
	}
	entries, _ := os.ReadDir(filepath.Join(te.Root, "quadlets"))
	if len(entries) != 0 {
		t.Fatalf("left in the quadlet directory: %v", entries)
	}
}
