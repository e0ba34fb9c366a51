package imagesapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/need"
	"github.com/berth-project/berth/engine/testimage"
	"github.com/berth-project/berth/shared/testnet"
)

// startPodmanService starts Podman 4.3.1's API service on loopback with its
// own store in a temporary directory and returns its base URL.
func startPodmanService(t *testing.T) string {
	t.Helper()
	podman := need.Program(t, "image tests", "podman")
	// Podman refuses a runroot longer than 50 characters: keep the path short.
	dir, err := os.MkdirTemp("", "bp-")
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "containers.conf")
	if err = os.WriteFile(conf, []byte(fmt.Sprintf(`[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "%[1]s/events.log"
runtime = "runc"
tmp_dir = "%[1]s/tmp"
volume_path = "%[1]s/volumes"
static_dir = "%[1]s/root/libpod"
[network]
network_config_dir = "%[1]s/networks"
`, dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := testnet.FreeAddr(t)
	cmd := exec.Command(podman, "--root", filepath.Join(dir, "root"), "--runroot", filepath.Join(dir, "run"),
		"--storage-driver", "vfs", "system", "service", "--time=0", "tcp:"+addr)
	cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+conf)
	logFile, err := os.Create(filepath.Join(dir, "service.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	t.Cleanup(func() {
		logFile.Close()
		// The vfs store holds read-only directories; make them removable.
		_ = exec.Command("chmod", "-R", "u+w", dir).Run()
		os.RemoveAll(dir)
	})
	base := "http://" + addr
	log := func() string {
		data, _ := os.ReadFile(filepath.Join(dir, "service.log"))
		return string(data)
	}
	testnet.StartServer(t, "podman service", cmd, 10*time.Second, false).WaitReady(t, base+"/v4.3.1/libpod/_ping", 30*time.Second, log)
	return base
}

// fetchJSON calls base+path and decodes the JSON answer generically.
func fetchJSON(t *testing.T, method, base, path string, body []byte) (int, any) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s%s: %v", method, base, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var v any
	if len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatalf("%s %s%s: %q is not JSON: %v", method, base, path, data, err)
		}
	}
	return resp.StatusCode, v
}

// podman5Fields are listing fields Podman 5 added (berth serves them to
// every client; Podman 4.3.1 lacks them).
var podman5Fields = map[string]bool{"Arch": true, "Os": true, "IsManifestList": true}

// scrub removes what legitimately differs between two stores: paths on disk,
// fields of a newer Podman, and the texts of a report's Errors (the same
// words, "image not known", with other context; clients only look at the
// status and ExitCode).
func scrub(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		_, listing := x["SharedSize"]
		for k, val := range x {
			if k == "GraphDriver" || (listing && podman5Fields[k]) {
				continue
			}
			if k == "Errors" {
				if list, ok := val.([]any); ok {
					out[k] = len(list)
					continue
				}
			}
			out[k] = scrub(val)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = scrub(x[i])
		}
		return out
	default:
		return v
	}
}

// TestWireParityWithPodman loads the same archive into berth-engine and into
// Podman 4.3.1 and compares their answers field by field: listings, inspect,
// history, tree, name resolution errors, tag/untag/remove reports, prune.
func TestWireParityWithPodman(t *testing.T) {
	e := startEngine(t)
	podman := startPodmanService(t)
	var archive bytes.Buffer
	if err := testimage.DockerArchive(&archive,
		testimage.Image{RepoTags: []string{"localhost/base:1"}, Config: testimage.Config{Cmd: []string{"sh"}, Labels: map[string]string{"role": "base"}}},
		testimage.Image{RepoTags: []string{"localhost/child:1", "quay.io/team/child:2"}, Comment: "child image",
			Config: testimage.Config{Entrypoint: []string{"/bin/sh"}, Env: []string{"A=1"}, WorkingDir: "/tmp", User: "nobody"},
			Layers: []testimage.Layer{{Files: []testimage.File{{Path: "c", Data: []byte("c")}}}}},
		testimage.Image{RepoTags: []string{"localhost/sibling:1"},
			Layers: []testimage.Layer{{Files: []testimage.File{{Path: "s", Data: []byte("s")}}}, {Files: []testimage.File{{Path: "t", Data: []byte("t")}}}}},
	); err != nil {
		t.Fatal(err)
	}
	both := []string{e.Base(), podman}
	loadArchive(t, archive.Bytes(), both...)

	compare := parity(t, e.Base(), podman)
	esc := url.PathEscape
	compare(http.MethodGet, "/v4.3.1/libpod/images/json")
	compare(http.MethodGet, "/v4.3.1/libpod/images/json?all=true")
	compare(http.MethodGet, "/v4.3.1/libpod/images/json?filters="+url.QueryEscape(`{"label":["role=base"]}`))
	compare(http.MethodGet, "/v4.3.1/libpod/images/json?filters="+url.QueryEscape(`{"reference":["child"]}`))
	// What the 4.3.1 client sends for --filter label=role=base.
	compare(http.MethodGet, "/v4.3.1/libpod/images/json?filters="+url.QueryEscape(`{"label":["role","base"]}`))
	for _, name := range []string{"localhost/base:1", "base:1", "child:1", "quay.io/team/child:2", "sibling:1"} {
		compare(http.MethodGet, "/v4.3.1/libpod/images/"+esc(name)+"/json")
		compare(http.MethodGet, "/v4.3.1/libpod/images/"+esc(name)+"/history")
		compare(http.MethodGet, "/v4.3.1/libpod/images/"+esc(name)+"/tree")
	}
	compare(http.MethodGet, "/v4.3.1/libpod/images/base:1/tree?whatrequires=true")
	compare(http.MethodGet, "/v4.3.1/libpod/images/absent/json")
	compare(http.MethodGet, "/v4.3.1/libpod/images/absent/exists")
	compare(http.MethodGet, "/v4.3.1/libpod/images/base:1/exists")
	compare(http.MethodPost, "/v4.3.1/libpod/images/base:1/tag?repo=retag&tag=9")
	compare(http.MethodGet, "/v4.3.1/libpod/images/localhost%2Fretag:9/json")
	compare(http.MethodPost, "/v4.3.1/libpod/images/base:1/untag?repo=localhost/retag&tag=9")
	compare(http.MethodDelete, "/v4.3.1/libpod/images/quay.io%2Fteam%2Fchild:2")
	compare(http.MethodDelete, "/v4.3.1/libpod/images/remove?images=absent&images=child:1")
	compare(http.MethodPost, "/v4.3.1/libpod/images/base:1/untag")
	compare(http.MethodGet, "/v4.3.1/libpod/images/json?all=true")
	compare(http.MethodPost, "/v4.3.1/libpod/images/prune")
	compare(http.MethodGet, "/v4.3.1/libpod/images/json?all=true")

	// Both answer an unknown image with a 404 engine error.
	for _, base := range both {
		status, body := fetchJSON(t, http.MethodGet, base, "/v4.3.1/libpod/images/absent/json", nil)
		m, _ := body.(map[string]any)
		if status != http.StatusNotFound || m["response"] != float64(404) || !strings.Contains(fmt.Sprint(m["message"]), "absent") {
			t.Errorf("%s: unknown image answered %d %v", base, status, body)
		}
	}
}

// TestWireParityParentsWithPodman compares parent/child handling: listings
// with and without intermediate images, inspect's Parent, tree, prune and
// removal of the last child, on berth-engine and Podman 4.3.1.
func TestWireParityParentsWithPodman(t *testing.T) {
	e := startEngine(t)
	podman := startPodmanService(t)
	var archive bytes.Buffer
	if err := testimage.DockerArchive(&archive, append(parentAndChild(), busybox("localhost/other:1"))...); err != nil {
		t.Fatal(err)
	}
	loadArchive(t, archive.Bytes(), e.Base(), podman)
	compare := parity(t, e.Base(), podman)
	compare(http.MethodGet, "/v4.3.1/libpod/images/json")
	compare(http.MethodGet, "/v4.3.1/libpod/images/child:1/json")
	compare(http.MethodGet, "/v4.3.1/libpod/images/other:1/json")
	compare(http.MethodGet, "/v4.3.1/libpod/images/parent:1/tree?whatrequires=true")
	compare(http.MethodPost, "/v4.3.1/libpod/images/parent:1/untag")
	compare(http.MethodGet, "/v4.3.1/libpod/images/json")
	compare(http.MethodGet, "/v4.3.1/libpod/images/json?all=true")
	compare(http.MethodPost, "/v4.3.1/libpod/images/prune")
	compare(http.MethodDelete, "/v4.3.1/libpod/images/child:1")
	compare(http.MethodGet, "/v4.3.1/libpod/images/json?all=true")
	// Podman removes the intermediate parent first (deleted, but not reported
	// since it still had a child); berth removes children first and reports
	// both. The outcome is compared: both answer 200 and end empty.
	for _, base := range []string{e.Base(), podman} {
		if status, _ := fetchJSON(t, http.MethodDelete, base, "/v4.3.1/libpod/images/remove?all=true", nil); status != http.StatusOK {
			t.Errorf("%s: remove all answered %d", base, status)
		}
	}
	compare(http.MethodGet, "/v4.3.1/libpod/images/json?all=true")
}

// TestWireParityOCIWithPodman compares an image loaded from an oci-archive
// (OCI manifest and config, annotations) on both engines.
func TestWireParityOCIWithPodman(t *testing.T) {
	e := startEngine(t)
	podman := startPodmanService(t)
	var archive bytes.Buffer
	if err := testimage.OCIArchive(&archive, testimage.Image{RepoTags: []string{"localhost/oci:1"},
		Config: testimage.Config{Cmd: []string{"sh"}, Labels: map[string]string{"format": "oci"}, ExposedPorts: []string{"80/tcp"}, StopSignal: "SIGTERM"}}); err != nil {
		t.Fatal(err)
	}
	var loaded [2]any
	for i, base := range []string{e.Base(), podman} {
		status, body := fetchJSON(t, http.MethodPost, base, "/v4.3.1/libpod/images/load", archive.Bytes())
		if status != http.StatusOK {
			t.Fatalf("load into %s: %d %v", base, status, body)
		}
		loaded[i] = body
	}
	if !reflect.DeepEqual(loaded[0], loaded[1]) {
		t.Errorf("load reports differ: berth %v, podman %v", loaded[0], loaded[1])
	}
	names, _ := loaded[1].(map[string]any)["Names"].([]any)
	if len(names) != 1 {
		t.Fatalf("podman loaded %v", loaded[1])
	}
	name := url.PathEscape(fmt.Sprint(names[0]))
	for _, path := range []string{"/v4.3.1/libpod/images/json", "/v4.3.1/libpod/images/" + name + "/json", "/v4.3.1/libpod/images/" + name + "/history"} {
		s1, v1 := fetchJSON(t, http.MethodGet, e.Base(), path, nil)
		s2, v2 := fetchJSON(t, http.MethodGet, podman, path, nil)
		if s1 != s2 || !reflect.DeepEqual(scrub(v1), scrub(v2)) {
			ja, _ := json.MarshalIndent(scrub(v1), "", " ")
			jb, _ := json.MarshalIndent(scrub(v2), "", " ")
			t.Errorf("GET %s differs (%d / %d):\nberth:  %s\npodman: %s", path, s1, s2, ja, jb)
		}
	}
}

// loadArchive loads an image archive into each engine at bases.
func loadArchive(t *testing.T, archive []byte, bases ...string) {
	t.Helper()
	for _, base := range bases {
		if status, _ := fetchJSON(t, http.MethodPost, base, "/v4.3.1/libpod/images/load", archive); status != http.StatusOK {
			t.Fatalf("load into %s: %d", base, status)
		}
	}
}

// parity returns the check that one request answers the same from Berth
// (at berth) and from Podman (at podman): the same status and, below 400,
// the same JSON once scrubbed (error texts differ; their status and shape
// are checked elsewhere).
func parity(t *testing.T, berth, podman string) func(method, path string) {
	return func(method, path string) {
		t.Helper()
		s1, v1 := fetchJSON(t, method, berth, path, nil)
		s2, v2 := fetchJSON(t, method, podman, path, nil)
		if s1 != s2 {
			t.Errorf("%s %s: berth %d, podman %d (%v / %v)", method, path, s1, s2, v1, v2)
			return
		}
		if a, b := scrub(v1), scrub(v2); s1 < 400 && !reflect.DeepEqual(a, b) {
			ja, _ := json.MarshalIndent(a, "", " ")
			jb, _ := json.MarshalIndent(b, "", " ")
			t.Errorf("%s %s differs:\nberth:  %s\npodman: %s", method, path, ja, jb)
		}
	}
}
