package transfertest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/images/imagestore/registrytest"
	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/testimage"
)

// call sends a request and returns status and body.
func call(t testing.TB, method, rawURL string, body io.Reader, header http.Header) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, rawURL, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	client := &http.Client{Timeout: 3 * time.Minute}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rawURL, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, data
}

// engineError is the engine's error body.
type engineError struct {
	Cause    string `json:"cause"`
	Message  string `json:"message"`
	Response int    `json:"response"`
}

func expectError(t testing.TB, what string, status int, body []byte, want int) engineError {
	t.Helper()
	var e engineError
	if status != want {
		t.Errorf("%s: status %d (%s), want %d", what, status, body, want)
		return e
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Response != want || e.Message == "" {
		t.Errorf("%s: body %s is not an engine error with response %d", what, body, want)
	}
	return e
}

// streamLines decodes a JSON-lines stream.
func streamLines(t testing.TB, body []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("stream line %q is not JSON: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

func TestHTTPLoadImportExportScp(t *testing.T) {
	e := newEnv(t)
	srv := e.server(t)
	base := srv.URL + "/v4.3.1/libpod"

	status, body := call(t, http.MethodPost, base+"/images/load", bytes.NewReader(archive(t, testimage.Docker, testimage.Busybox("localhost/web:1", "true"))), nil)
	if status != http.StatusOK || strings.TrimSpace(string(body)) != `{"Names":["localhost/web:1"]}` {
		t.Fatalf("load: %d %s", status, body)
	}
	status, body = call(t, http.MethodPost, base+"/images/load", strings.NewReader("definitely not a tar archive, not even close"), nil)
	expectError(t, "load garbage", status, body, http.StatusBadRequest)

	path := filepath.Join(t.TempDir(), "local.tar")
	if err := testimage.WriteFile(path, testimage.OCI, testimage.Busybox("localhost/fromdisk:1", "true")); err != nil {
		t.Fatal(err)
	}
	status, body = call(t, http.MethodPost, base+"/local/images/load?path="+url.QueryEscape(path), nil, nil)
	if status != http.StatusOK || !strings.Contains(string(body), "localhost/fromdisk:1") {
		t.Fatalf("local load: %d %s", status, body)
	}

	q := url.Values{"reference": {"imported:2"}, "message": {"via http"}, "changes": {"CMD /bin/true", "ENV X=1"}}
	status, body = call(t, http.MethodPost, base+"/images/import?"+q.Encode(), bytes.NewReader(rootfs(t)), nil)
	var imported struct{ Id string }
	if status != http.StatusOK || json.Unmarshal(body, &imported) != nil || !strings.HasPrefix(imported.Id, "sha256:") {
		t.Fatalf("import: %d %s", status, body)
	}
	q = url.Values{"changes": {"FROM scratch"}}
	status, body = call(t, http.MethodPost, base+"/images/import?"+q.Encode(), bytes.NewReader(rootfs(t)), nil)
	expectError(t, "import with a bad change", status, body, http.StatusBadRequest)

	status, body = call(t, http.MethodGet, base+"/images/"+url.PathEscape("localhost/web:1")+"/get?format=docker-archive", nil, nil)
	if status != http.StatusOK || !slices.Contains(tarNames(t, body), "manifest.json") {
		t.Fatalf("export one: %d", status)
	}
	status, body = call(t, http.MethodGet, base+"/images/localhost/web:1/get?format=oci-archive", nil, nil)
	if status != http.StatusOK || !slices.Contains(tarNames(t, body), "index.json") {
		t.Fatalf("export one with unescaped slashes: %d", status)
	}
	status, body = call(t, http.MethodGet, base+"/images/nope:1/get", nil, nil)
	expectError(t, "export unknown", status, body, http.StatusNotFound)
	status, body = call(t, http.MethodGet, base+"/images/export?references=localhost/web:1&references=localhost/imported:2&format=docker-archive", nil, nil)
	if status != http.StatusOK {
		t.Fatalf("export several: %d %s", status, body)
	}
	names, err := newEnv(t).transfer.Load(context.Background(), bytes.NewReader(body), core.LoadOptions{})
	if err != nil || !slices.Equal(names, []string{"localhost/web:1", "localhost/imported:2"}) {
		t.Fatalf("export several reloaded as %v %v", names, err)
	}
	status, body = call(t, http.MethodGet, base+"/images/export?references=localhost/web:1&references=localhost/imported:2&format=oci-archive", nil, nil)
	expectError(t, "several as oci-archive", status, body, http.StatusBadRequest)

	other := newEnv(t)
	otherSrv := other.server(t)
	dest := "tcp://" + otherSrv.Listener.Addr().String() + "::"
	status, body = call(t, http.MethodPost, base+"/images/scp/"+url.PathEscape("localhost/web:1")+"?destination="+url.QueryEscape(dest), nil, nil)
	if status != http.StatusOK || strings.TrimSpace(string(body)) != `{"Id":"localhost/web:1"}` {
		t.Fatalf("scp: %d %s", status, body)
	}
	if _, err := other.store.Lookup(context.Background(), "localhost/web:1"); err != nil {
		t.Errorf("scp did not reach the other engine: %v", err)
	}
}

func TestHTTPPullPushStreams(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{Username: "u", Password: "p"})
	e := newEnv(t)
	srv := e.server(t)
	base := srv.URL + "/libpod"
	id := e.load(t, "localhost/streamed:1")
	ref := reg.Host + "/streamed:1"
	single := base64.URLEncoding.EncodeToString([]byte(`{"username":"u","password":"p"}`))
	multi := base64.URLEncoding.EncodeToString([]byte(`{"` + reg.Host + `":{"username":"u","password":"p"}}`))

	// Push without credentials: the registry refuses before any progress, so the status says so.
	status, body := call(t, http.MethodPost, base+"/images/localhost%2Fstreamed:1/push?tlsVerify=false&destination="+url.QueryEscape(ref), nil, nil)
	if status == http.StatusOK {
		t.Fatalf("push without credentials: %d %s", status, body)
	}
	// Quiet push (Podman's default) answers once done.
	status, body = call(t, http.MethodPost, base+"/images/localhost%2Fstreamed:1/push?tlsVerify=false&destination="+url.QueryEscape(ref), nil, http.Header{"X-Registry-Auth": {single}})
	if status != http.StatusOK {
		t.Fatalf("quiet push: %d %s", status, body)
	}
	// Streamed push: only stream lines on success.
	status, body = call(t, http.MethodPost, base+"/images/localhost%2Fstreamed:1/push?quiet=false&tlsVerify=false&destination="+url.QueryEscape(ref), nil, http.Header{"X-Registry-Auth": {multi}})
	lines := streamLines(t, body)
	if status != http.StatusOK || len(lines) < 2 {
		t.Fatalf("streamed push: %d %s", status, body)
	}
	for _, l := range lines[:len(lines)-1] {
		if _, ok := l["stream"]; !ok || len(l) != 1 {
			t.Errorf("push line %v is not a stream line", l)
		}
	}
	pushedDigest, _ := lines[len(lines)-1]["manifestdigest"].(string)
	if len(lines[len(lines)-1]) != 1 || !strings.HasPrefix(pushedDigest, "sha256:") || len(pushedDigest) != 71 {
		t.Errorf("the push stream ends with %v, want the manifest digest", lines[len(lines)-1])
	}
	status, body = call(t, http.MethodPost, base+"/images/missing:1/push?destination="+url.QueryEscape(ref), nil, nil)
	expectError(t, "push unknown image", status, body, http.StatusNotFound)
	status, body = call(t, http.MethodPost, base+"/images/localhost%2Fstreamed:1/push?destination=oci:/tmp/x", nil, nil)
	expectError(t, "push to another transport", status, body, http.StatusBadRequest)

	other := newEnv(t)
	otherSrv := other.server(t)
	obase := otherSrv.URL + "/v4.3.1/libpod"
	status, body = call(t, http.MethodPost, obase+"/images/pull?reference="+url.QueryEscape(ref)+"&tlsVerify=false", nil, http.Header{"X-Registry-Auth": {single}})
	lines = streamLines(t, body)
	if status != http.StatusOK || len(lines) < 2 {
		t.Fatalf("pull: %d %s", status, body)
	}
	last := lines[len(lines)-1]
	if last["id"] != id || len(last["images"].([]any)) != 1 {
		t.Errorf("last pull line %v, want id %s", last, id)
	}
	if s, _ := lines[0]["stream"].(string); !strings.HasPrefix(s, "Trying to pull "+ref) {
		t.Errorf("first pull line %v", lines[0])
	}
	status, body = call(t, http.MethodPost, obase+"/images/pull?quiet=true&reference="+url.QueryEscape(ref)+"&tlsverify=false", nil, http.Header{"X-Registry-Auth": {single}})
	if status != http.StatusOK || strings.TrimSpace(string(body)) != `{"images":["`+id+`"],"id":"`+id+`"}` {
		t.Errorf("quiet pull: %d %s", status, body)
	}
	if pulled, err := other.store.Lookup(context.Background(), ref); err != nil || pulled.Digest != pushedDigest {
		t.Errorf("pulled image digest %v (%v), the push reported %s", pulled, err, pushedDigest)
	}

	// compatMode: Docker's progress objects, each blob started and finished,
	// ending with Docker's status line.
	compat := newEnv(t).server(t)
	status, body = call(t, http.MethodPost, compat.URL+"/v5.0.0/libpod/images/pull?compatMode=true&tlsVerify=false&reference="+url.QueryEscape(ref), nil, http.Header{"X-Registry-Auth": {single}})
	lines = streamLines(t, body)
	if status != http.StatusOK || len(lines) < 3 {
		t.Fatalf("compatMode pull: %d %s", status, body)
	}
	seen := map[string]bool{}
	for _, l := range lines {
		if _, ok := l["stream"]; ok {
			t.Errorf("compatMode line %v carries Podman's stream", l)
		}
		st, _ := l["status"].(string)
		seen[st] = true
	}
	if !seen["Pulling fs layer"] || !seen["Download complete"] {
		t.Errorf("compatMode statuses %v lack a layer's start or end", seen)
	}
	if st, _ := lines[len(lines)-1]["status"].(string); st != "Status: Downloaded newer image for "+ref {
		t.Errorf("compatMode ends with %v", lines[len(lines)-1])
	}

	// pullProgress: Podman 6's lines (text, and each blob's progress with
	// its words), every one with a status, then the final report.
	progress := newEnv(t).server(t)
	status, body = call(t, http.MethodPost, progress.URL+"/v5.0.0/libpod/images/pull?pullProgress=true&tlsVerify=false&reference="+url.QueryEscape(ref), nil, http.Header{"X-Registry-Auth": {single}})
	lines = streamLines(t, body)
	if status != http.StatusOK || len(lines) < 3 {
		t.Fatalf("pullProgress pull: %d %s", status, body)
	}
	done, text := 0, 0
	words := map[string]string{"Starting to pull artifact": "pulling", "Pulling artifact": "pulling", "Artifact pulled successfully": "success", "Artifact already exists": "skipped"}
	for _, l := range lines[:len(lines)-1] {
		if l["status"] != "pulling" {
			t.Errorf("pullProgress line without status pulling: %v", l)
		}
		p, ok := l["pullProgress"].(map[string]any)
		if !ok {
			if s, _ := l["stream"].(string); s != "" && len(l) == 2 {
				text++
			} else {
				t.Errorf("pullProgress text line %v", l)
			}
			continue
		}
		if want, known := words[l["stream"].(string)]; !known || p["status"] != want {
			t.Errorf("pullProgress line %v: stream and status do not match Podman 6's words", l)
		}
		if p["status"] == "success" && strings.HasPrefix(p["progressComponentID"].(string), "sha256:") && p["total"] != nil && p["current"] == p["total"] {
			done++
		}
	}
	if done < 2 || text == 0 {
		t.Errorf("pullProgress reported %d finished blobs (want the layer and the configuration) and %d text lines", done, text)
	}
	if last := lines[len(lines)-1]; last["id"] != id || last["status"] != "success" {
		t.Errorf("pullProgress ends with %v, want the report of %s with status success", last, id)
	}
	// The default stream keeps Podman 4/5's lines: no status.
	plain := newEnv(t).server(t)
	_, body = call(t, http.MethodPost, plain.URL+"/v5.0.0/libpod/images/pull?tlsVerify=false&reference="+url.QueryEscape(ref), nil, http.Header{"X-Registry-Auth": {single}})
	for _, l := range streamLines(t, body) {
		if _, has := l["status"]; has {
			t.Errorf("default pull stream line with a status: %v", l)
		}
	}
	for _, q := range []string{"quiet=true&compatMode=true", "quiet=true&pullProgress=true", "compatMode=true&pullProgress=true"} {
		status, body = call(t, http.MethodPost, obase+"/images/pull?"+q+"&reference="+url.QueryEscape(ref), nil, nil)
		expectError(t, q, status, body, http.StatusBadRequest)
	}

	cases := []struct {
		what, query string
		header      http.Header
		want        int
	}{
		{"no reference", "", nil, http.StatusBadRequest},
		{"other transport", "reference=docker-archive:/tmp/x.tar", nil, http.StatusBadRequest},
		{"malformed", "reference=" + url.QueryEscape("Bad:Ref:Here"), nil, http.StatusBadRequest},
		{"bad policy", "reference=" + url.QueryEscape(ref) + "&policy=sometimes", nil, http.StatusBadRequest},
		{"bad auth header", "reference=" + url.QueryEscape(ref), http.Header{"X-Registry-Auth": {"%%%"}}, http.StatusBadRequest},
		{"unknown image", "tlsVerify=false&reference=" + url.QueryEscape(reg.Host+"/nothing:1"), http.Header{"X-Registry-Auth": {single}}, http.StatusNotFound},
		{"never, not local", "policy=never&reference=" + url.QueryEscape(reg.Host+"/nothing:1"), nil, http.StatusNotFound},
		{"unreachable", "tlsVerify=false&reference=" + url.QueryEscape(closedAddr(t)+"/x:1"), nil, http.StatusInternalServerError},
	}
	for _, c := range cases {
		status, body := call(t, http.MethodPost, obase+"/images/pull?"+c.query, nil, c.header)
		e := expectError(t, c.what, status, body, c.want)
		if c.what == "no reference" && e.Message != "invalid reference: an image reference is required" {
			t.Errorf("no reference: message %q does not say what is missing", e.Message)
		}
	}
}

// TestHTTPPullClientGoneLeavesNoLayers: the client hangs up mid-pull; the
// request context ends the copy and the store is as before.
func TestHTTPPullClientGoneLeavesNoLayers(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	src := newEnv(t)
	big := withLayer(testimage.Busybox("localhost/hangup:1", "true"), testimage.RandomLayer(128<<20, 3))
	if _, err := src.transfer.Load(context.Background(), bytes.NewReader(archive(t, testimage.Docker, big)), core.LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	ref := reg.Host + "/hangup:1"
	if _, err := src.transfer.Push(context.Background(), "localhost/hangup:1", pushTo(ref)); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	srv := e.server(t)
	before := e.snapshot(t)

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/libpod/images/pull?tlsVerify=false&reference="+url.QueryEscape(ref), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "Copying blob") {
			break
		}
	}
	cancel()
	resp.Body.Close()
	srv.Config.Close()
	srv.Close()
	if after := e.snapshot(t); !slices.Equal(before.Images, after.Images) || !slices.Equal(before.Layers, after.Layers) {
		t.Errorf("client hang-up left something:\nbefore %s\nafter  %s", before, after)
	}
	checkStore(t, e.store.Storage())
	leftovers, _ := os.ReadDir(filepath.Join(e.root, "root", "tmp"))
	for _, l := range leftovers {
		t.Errorf("temporary file left behind: %s", l.Name())
	}
}
