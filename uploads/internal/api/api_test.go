package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-project/berth/shared/auth"
	"github.com/berth-project/berth/shared/server"
	"github.com/berth-project/berth/uploads/internal/api"
	"github.com/berth-project/berth/uploads/internal/files"
	"github.com/berth-project/berth/uploads/internal/processor"
	"github.com/berth-project/berth/uploads/internal/store"
	"github.com/berth-project/berth/uploads/internal/store/storetest"
	"github.com/google/uuid"
)

// env is a real server on a real loopback listener, with its store and data dir.
type env struct {
	t       *testing.T
	base    string
	dataDir string
	store   store.Store
	token   string
}

type envOpts struct {
	limits api.Limits
	tokens []string
	open   storetest.Opener
	worker bool
	// st and dataDir, when set, are shared with other envs: replicas.
	st      store.Store
	dataDir string
	// space, when set, keeps the disk headroom (and /readyz checks it).
	space *files.Space
}

func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	if o.open == nil {
		o.open = storetest.SQLite
	}
	dataDir := o.dataDir
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	st := o.st
	if st == nil {
		st = o.open(t)
	}
	tree, err := files.New(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	metrics := server.NewMetrics("berth_uploads")
	observe := api.RegisterMetrics(logger, metrics.Registry(), st)
	onFile := api.RegisterFileMetrics(metrics.Registry())
	w := processor.New(logger, st, tree, processor.Unsupported{}, processor.Config{PollInterval: 20 * time.Millisecond, Observe: observe, OnFile: onFile})
	checks := map[string]server.Check{"database": st.Ping}
	if o.space != nil {
		checks["disk"] = o.space.Check
	}
	h := api.NewServer(logger, st, tree, api.Config{
		Limits:      o.limits,
		Tokens:      o.tokens,
		ReadyChecks: checks,
		Metrics:     metrics,
		OnPending:   w.Wake,
		Space:       o.space,
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	if o.worker {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = w.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	e := &env{t: t, base: srv.URL, dataDir: dataDir, store: st}
	if len(o.tokens) > 0 {
		e.token = o.tokens[0]
	}
	return e
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
}

// problem checks that r is a problem document with the given status and returns it.
func (r resp) problem(t *testing.T, status int) map[string]any {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q for %d; body %s", ct, status, r.body)
	}
	var p map[string]any
	r.json(t, &p)
	for _, k := range []string{"type", "title", "status", "detail"} {
		if _, ok := p[k]; !ok {
			t.Fatalf("problem lacks %q: %s", k, r.body)
		}
	}
	if int(p["status"].(float64)) != status {
		t.Fatalf("problem status %v, want %d", p["status"], status)
	}
	return p
}

func (e *env) do(method, path string, body io.Reader, header ...string) resp {
	e.t.Helper()
	req, err := http.NewRequest(method, e.base+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return e.send(req)
}

// putChunked PUTs body to path without a declared length (chunked), as a
// client streaming a file of unknown size does.
func (e *env) putChunked(path string, body io.Reader) resp {
	e.t.Helper()
	req, err := http.NewRequest("PUT", e.base+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	req.ContentLength = -1
	return e.send(req)
}

// send sends req and reads the whole answer.
func (e *env) send(req *http.Request) resp {
	e.t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{res.StatusCode, res.Header, b}
}

// raw sends a request line exactly as given, so that no client library cleans or
// re-encodes the path.
func (e *env) raw(method, target string, body string, header ...string) resp {
	e.t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: test\r\nConnection: close\r\nContent-Length: %d\r\n", method, target, len(body))
	if e.token != "" {
		fmt.Fprintf(&b, "Authorization: Bearer %s\r\n", e.token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", header[i], header[i+1])
	}
	b.WriteString("\r\n" + body)
	if _, err := io.WriteString(conn, b.String()); err != nil {
		e.t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, target, err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return resp{res.StatusCode, res.Header, data}
}

type upload struct {
	UUID           string `json:"uuid"`
	Status         string `json:"status"`
	FilesTotal     *int   `json:"filesTotal"`
	FilesProcessed *int   `json:"filesProcessed"`
	Errors         *int   `json:"errors"`
	Images         *int   `json:"images"`
}

func (e *env) create() string {
	e.t.Helper()
	r := e.do("POST", "/v1/uploads", nil)
	if r.status != http.StatusCreated {
		e.t.Fatalf("create: %d %s", r.status, r.body)
	}
	var u upload
	r.json(e.t, &u)
	if u.Status != "open" || r.header.Get("Location") != "/v1/uploads/"+u.UUID {
		e.t.Fatalf("created %+v, Location %q", u, r.header.Get("Location"))
	}
	return u.UUID
}

func (e *env) put(id, path, body string) resp {
	e.t.Helper()
	return e.do("PUT", "/v1/uploads/"+id+"/files/"+path, strings.NewReader(body), "Content-Type", "application/octet-stream")
}

func (e *env) mustPut(id, path, body string) {
	e.t.Helper()
	if r := e.put(id, path, body); r.status != http.StatusNoContent {
		e.t.Fatalf("PUT %s: %d %s", path, r.status, r.body)
	}
}

// treeContents lists every regular file under the upload's tree and its temporaries
// (not the intent file of its books, see files.Tree).
func (e *env) treeContents(id string) []string {
	e.t.Helper()
	var out []string
	root := filepath.Join(e.dataDir, "uploads", id)
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && p != filepath.Join(root, "intent") {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

func TestAPI(t *testing.T) {
	for name, open := range storetest.Backends(t) {
		t.Run(name, func(t *testing.T) {
			t.Run("UploadsCRUDAndPaging", func(t *testing.T) { testUploads(t, newEnv(t, envOpts{open: open})) })
			t.Run("Files", func(t *testing.T) { testFiles(t, newEnv(t, envOpts{open: open})) })
			t.Run("Processing", func(t *testing.T) { testProcessing(t, newEnv(t, envOpts{open: open, worker: true})) })
			t.Run("Images", func(t *testing.T) { testImages(t, newEnv(t, envOpts{open: open})) })
			t.Run("Limits", func(t *testing.T) {
				testLimits(t, newEnv(t, envOpts{open: open, limits: api.Limits{MaxFileSize: 100, MaxUploadSize: 250, MaxFiles: 3, MaxPathLength: 40, MaxPathDepth: 3}}))
			})
		})
	}
}

func testUploads(t *testing.T, e *env) {
	var ids []string
	for i := 0; i < 30; i++ {
		ids = append(ids, e.create())
	}
	r := e.do("GET", "/v1/uploads", nil)
	var list []upload
	r.json(t, &list)
	h := r.header
	if r.status != 200 || len(list) != 25 || h.Get("Pagination-Count") != "25" || h.Get("Pagination-Offset") != "0" ||
		h.Get("Pagination-Limit") != "25" || h.Get("Pagination-Total") != "30" {
		t.Fatalf("default page: %d items, headers %v", len(list), h)
	}
	r = e.do("GET", "/v1/uploads?limit=100&offset=28", nil)
	r.json(t, &list)
	if len(list) != 2 || list[1].UUID != ids[29] || r.header.Get("Pagination-Count") != "2" || r.header.Get("Pagination-Limit") != "100" {
		t.Fatalf("last page: %+v %v", list, r.header)
	}
	for _, q := range []string{"limit=0", "limit=101", "limit=-1", "limit=abc", "limit=", "offset=-1", "offset=x", "limit=1.5"} {
		e.do("GET", "/v1/uploads?"+q, nil).problem(t, 400)
	}

	id := ids[0]
	var u upload
	r = e.do("GET", "/v1/uploads/"+id, nil)
	r.json(t, &u)
	if r.status != 200 || u.UUID != id || u.Status != "open" || u.FilesTotal != nil {
		t.Fatalf("get: %d %s", r.status, r.body)
	}
	upper := strings.ToUpper(id)
	if r := e.do("GET", "/v1/uploads/"+upper, nil); r.status != 200 {
		t.Fatalf("upper-case uuid: %d", r.status)
	}

	unknown := "1b4e28ba-2fa1-11d2-883f-0016d3cca427"
	for _, bad := range []string{"nope", "123", "{" + id + "}", "urn:uuid:" + id, strings.ReplaceAll(id, "-", ""), id + "0", "%00", "..", "1b4e28ba-2fa1-11d2-883f-0016d3cca42g"} {
		for _, m := range [][2]string{{"GET", ""}, {"DELETE", ""}, {"GET", "/errors"}, {"POST", "/markForProcessing"}, {"GET", "/files/a"}, {"PUT", "/files/a"}, {"DELETE", "/files/a"}} {
			r := e.raw(m[0], "/v1/uploads/"+bad+m[1], "", "Content-Type", "application/octet-stream")
			if r.status == 404 && bad == ".." {
				continue // "/v1/uploads/.." is not under /{uuid} for every router
			}
			p := r.problem(t, 400)
			if p["type"] != "urn:berth:problem:invalid-uuid" {
				t.Fatalf("%s %s: %v", m[0], bad, p)
			}
		}
	}
	for _, m := range [][2]string{{"GET", ""}, {"GET", "/errors"}, {"POST", "/markForProcessing"}, {"GET", "/files/a"}, {"GET", "/files"}, {"DELETE", "/files/a"}} {
		p := e.do(m[0], "/v1/uploads/"+unknown+m[1], nil).problem(t, 404)
		if p["type"] != "urn:berth:problem:upload-not-found" || p["uuid"] != unknown {
			t.Fatalf("%s unknown: %v", m[0], p)
		}
	}
	e.put(unknown, "a", "x").problem(t, 404)
	if r := e.do("DELETE", "/v1/uploads/"+unknown, nil); r.status != 204 {
		t.Fatalf("delete unknown: %d", r.status)
	}

	e.mustPut(id, "dir/file", "data")
	if len(e.treeContents(id)) != 1 {
		t.Fatal("file not on disk")
	}
	if r := e.do("DELETE", "/v1/uploads/"+id, nil); r.status != 204 {
		t.Fatalf("delete: %d", r.status)
	}
	if _, err := os.Stat(filepath.Join(e.dataDir, "uploads", id)); !os.IsNotExist(err) {
		t.Fatalf("files of a deleted upload remain: %v", err)
	}
	e.do("GET", "/v1/uploads/"+id, nil).problem(t, 404)
	if r := e.do("DELETE", "/v1/uploads/"+id, nil); r.status != 204 {
		t.Fatalf("second delete: %d", r.status)
	}

	e.do("GET", "/nowhere", nil).problem(t, 404)
	for p, allow := range map[string]string{
		"/v1/uploads":                                  "GET, HEAD, POST",
		"/v1/uploads/":                                 "GET, HEAD, POST",
		"/v1/uploads/" + ids[1]:                        "DELETE, GET, HEAD",
		"/v1/uploads/" + ids[1] + "/files/x/y":         "DELETE, GET, HEAD, PUT",
		"/v1/uploads/" + ids[1] + "/markForProcessing": "POST",
		"/v1/uploads/" + ids[1] + "/errors":            "GET, HEAD",
		"/v1/uploads/" + ids[1] + "/images":            "GET, HEAD",
		"/healthz":                                     "GET, HEAD",
	} {
		r := e.do("PATCH", p, nil)
		r.problem(t, 405)
		if got := r.header.Get("Allow"); got != allow {
			t.Errorf("PATCH %s: Allow %q, want %q", p, got, allow)
		}
	}
	e.do("PATCH", "/v1/uploads", nil).problem(t, 405)
	e.do("PUT", "/v1/uploads/"+ids[1], nil).problem(t, 405)
	if r := e.do("GET", "/healthz", nil); r.status != 200 {
		t.Fatalf("healthz %d", r.status)
	}
	if r := e.do("GET", "/readyz", nil); r.status != 200 || !bytes.Contains(r.body, []byte(`"database":"ok"`)) {
		t.Fatalf("readyz %d %s", r.status, r.body)
	}
	r = e.do("GET", "/metrics", nil)
	for _, want := range []string{`berth_uploads_uploads_in_state{state="open"} 29`, "berth_uploads_stored_bytes 0", `berth_uploads_http_requests_total{code="201",method="POST",route="/v1/uploads"} 30`} {
		if !bytes.Contains(r.body, []byte(want)) {
			t.Errorf("metrics lack %q:\n%s", want, r.body)
		}
	}
}

// invalidPaths are file paths as sent on the wire after ".../files/"; each must be 400.
var invalidPaths = []string{
	"..", "../x", "a/../../x", "a/..", "%2e%2e", "%2E%2E/x", "a/%2e%2e/b", "%2e%2e%2fx", "..%2fx",
	"%252e%252e", "%25252e%25252e/x", "a//b", "/a", "//a", "a/", "a%00b", "%00", "a%5cb", `a\b`, `..\..\x`,
	"..%5c..%5cx", "a%2fb", "a%2F..%2Fb", "./a", "a/.", "a/./b", "%2e/a", "%2e", "a%0ab", "%ff",
}

func testFiles(t *testing.T, e *env) {
	id := e.create()
	base := "/v1/uploads/" + id + "/files/"

	for _, p := range invalidPaths {
		for _, m := range []string{"GET", "PUT", "DELETE"} {
			r := e.raw(m, base+p, "x", "Content-Type", "application/octet-stream")
			if r.status != 400 {
				t.Fatalf("%s %q: %d %s", m, p, r.status, r.body)
			}
			if pr := r.problem(t, 400); pr["type"] != "urn:berth:problem:invalid-path" {
				t.Errorf("%s %q: %v", m, p, pr)
			}
		}
	}
	if got := e.treeContents(id); len(got) != 0 {
		t.Fatalf("invalid paths left files: %v", got)
	}

	// The root: "", "/" and "." are the same directory; it cannot be written or deleted.
	for _, p := range []string{"/v1/uploads/" + id + "/files", base, base + "."} {
		r := e.raw("GET", p, "")
		var info map[string]any
		r.json(t, &info)
		if r.status != 200 || info["name"] != "." || info["dir"] != true {
			t.Fatalf("GET root %q: %d %s", p, r.status, r.body)
		}
		e.raw("PUT", p, "x", "Content-Type", "application/octet-stream").problem(t, 400)
		e.raw("DELETE", p, "").problem(t, 400)
	}

	// 415
	for _, ct := range []string{"", "text/plain", "application/json", "application/octet-stream-x", "multipart/form-data; boundary=x"} {
		r := e.do("PUT", base+"f", strings.NewReader("x"), "Content-Type", ct)
		r.problem(t, 415)
	}
	if r := e.do("PUT", base+"f", strings.NewReader("x"), "Content-Type", "Application/Octet-Stream; charset=binary"); r.status != 204 {
		t.Fatalf("octet-stream with parameter: %d", r.status)
	}

	// Write, read as JSON and bytes, Range.
	content := "0123456789abcdefghij"
	e.mustPut(id, "dir/sub/file.bin", content)
	e.mustPut(id, "dir/ü n%25icode.txt", "u")
	r := e.do("GET", base+"dir/sub/file.bin", nil)
	var info struct {
		Name     string `json:"name"`
		Size     int64  `json:"size"`
		Dir      bool   `json:"dir"`
		Children []struct {
			Name string `json:"name"`
			Size int64  `json:"size"`
			Dir  bool   `json:"dir"`
		} `json:"children"`
		NextMarker string `json:"nextMarker"`
	}
	r.json(t, &info)
	if r.status != 200 || info.Name != "dir/sub/file.bin" || info.Size != 20 || info.Dir || len(info.Children) != 0 {
		t.Fatalf("file info: %s", r.body)
	}
	r = e.do("GET", base+"dir", nil)
	r.json(t, &info)
	if !info.Dir || len(info.Children) != 2 || info.Children[0].Name != "sub" || !info.Children[0].Dir || info.Children[1].Name != "ü n%icode.txt" {
		t.Fatalf("dir info: %s", r.body)
	}
	r = e.do("GET", base+"dir/sub/file.bin", nil, "Accept", "application/octet-stream")
	if r.status != 200 || string(r.body) != content || r.header.Get("Content-Type") != "application/octet-stream" || r.header.Get("Accept-Ranges") != "bytes" {
		t.Fatalf("raw: %d %q %v", r.status, r.body, r.header)
	}
	r = e.do("HEAD", base+"dir/sub/file.bin", nil, "Accept", "application/octet-stream")
	if r.status != 200 || r.header.Get("Content-Length") != "20" || len(r.body) != 0 {
		t.Fatalf("HEAD: %d %v", r.status, r.header)
	}
	r = e.do("GET", base+"dir/sub/file.bin", nil, "Accept", "application/octet-stream", "Range", "bytes=5-9")
	if r.status != 206 || string(r.body) != "56789" || r.header.Get("Content-Range") != "bytes 5-9/20" {
		t.Fatalf("range: %d %q %v", r.status, r.body, r.header)
	}
	r = e.do("GET", base+"dir/sub/file.bin", nil, "Accept", "application/octet-stream", "Range", "bytes=-3")
	if r.status != 206 || string(r.body) != "hij" {
		t.Fatalf("suffix range: %d %q", r.status, r.body)
	}
	if p := e.do("GET", base+"dir/sub/file.bin", nil, "Accept", "application/octet-stream", "Range", "bytes=50-60").problem(t, 416); p["type"] != "urn:berth:problem:range-not-satisfiable" {
		t.Fatalf("416: %v", p)
	}
	e.do("GET", base+"dir/sub/file.bin", nil, "Accept", "application/octet-stream", "If-Unmodified-Since", "Mon, 02 Jan 2006 15:04:05 GMT").problem(t, 412)
	if r := e.do("GET", base+"dir/sub/file.bin", nil, "Accept", "application/octet-stream", "If-Modified-Since", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)); r.status != 304 {
		t.Fatalf("conditional GET: %d", r.status)
	}
	e.do("GET", base+"dir", nil, "Accept", "application/octet-stream").problem(t, 400)
	e.do("GET", base+"dir/missing", nil).problem(t, 404)
	e.do("GET", base+"dir/sub/file.bin/below", nil).problem(t, 404)
	e.do("GET", base+"dir/missing", nil, "Accept", "application/octet-stream").problem(t, 404)

	// Conflicts with the tree.
	e.put(id, "dir/sub/file.bin/x", "x").problem(t, 409)
	e.put(id, "dir/sub", "x").problem(t, 409)

	// Directory paging.
	for i := 0; i < 250; i++ {
		e.mustPut(id, fmt.Sprintf("big/f%03d", i), "")
	}
	var names []string
	marker := ""
	pages := 0
	for pages < 10 {
		q := "?limit=100"
		if marker != "" {
			q += "&marker=" + marker
		}
		r := e.do("GET", base+"big"+q, nil)
		info.NextMarker = ""
		r.json(t, &info)
		pages++
		for _, c := range info.Children {
			names = append(names, c.Name)
		}
		if info.NextMarker == "" {
			break
		}
		marker = info.NextMarker
	}
	if pages != 3 || len(names) != 250 || names[0] != "f000" || names[249] != "f249" {
		t.Fatalf("paged %d pages, %d names", pages, len(names))
	}
	if r := e.do("GET", base+"big", nil); !bytes.Contains(r.body, []byte(`"nextMarker":"f099"`)) {
		t.Fatalf("default page size: %s", r.body[len(r.body)-60:])
	}
	for _, q := range []string{"?limit=0", "?limit=1001", "?limit=x"} {
		e.do("GET", base+"big"+q, nil).problem(t, 400)
	}

	// Delete a file, a directory with contents; missing is 404.
	if r := e.do("DELETE", base+"dir/sub/file.bin", nil); r.status != 204 {
		t.Fatalf("delete file: %d", r.status)
	}
	e.do("GET", base+"dir/sub/file.bin", nil).problem(t, 404)
	if r := e.do("DELETE", base+"big", nil); r.status != 204 {
		t.Fatalf("delete dir: %d", r.status)
	}
	e.do("DELETE", base+"big", nil).problem(t, 404)
	if got := e.treeContents(id); len(got) != 2 {
		t.Fatalf("left after deletes: %v", got)
	}

	// State guard: files only while open.
	if r := e.do("POST", "/v1/uploads/"+id+"/markForProcessing", nil); r.status != 202 {
		t.Fatalf("mark: %d %s", r.status, r.body)
	}
	p := e.put(id, "late", "x").problem(t, 409)
	if p["state"] != "pending" || p["type"] != "urn:berth:problem:invalid-state" {
		t.Fatalf("409 problem: %v", p)
	}
	e.do("GET", base+"f", nil).problem(t, 409)
	e.do("DELETE", base+"f", nil).problem(t, 409)
	e.do("POST", "/v1/uploads/"+id+"/markForProcessing", nil).problem(t, 409)
	// The path is checked before the state: an invalid one is still 400.
	e.raw("GET", base+"%2e%2e", "").problem(t, 400)
}

func testProcessing(t *testing.T, e *env) {
	id := e.create()
	e.do("GET", "/v1/uploads/"+id+"/errors", nil).problem(t, 409)
	for _, f := range []string{"b.txt", "a/image.tar", "a/unit.container", "c.yaml"} {
		e.mustPut(id, f, "content of "+f)
	}
	r := e.do("POST", "/v1/uploads/"+id+"/markForProcessing", nil)
	var u upload
	r.json(t, &u)
	if r.status != 202 || u.Status != "pending" {
		t.Fatalf("mark: %d %s", r.status, r.body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for u.Status != "done" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		e.do("GET", "/v1/uploads/"+id, nil).json(t, &u)
	}
	if u.Status != "done" || *u.FilesTotal != 4 || *u.FilesProcessed != 4 || *u.Errors != 4 {
		t.Fatalf("processed upload: %+v", u)
	}
	r = e.do("GET", "/v1/uploads/"+id+"/errors", nil)
	var errs []map[string]string
	r.json(t, &errs)
	if len(errs) != 4 || errs[0]["file"] != "a/image.tar" || errs[0]["message"] != "unsupported file type" || r.header.Get("Pagination-Total") != "4" || r.header.Get("Pagination-Limit") != "100" {
		t.Fatalf("errors: %s %v", r.body, r.header)
	}
	r = e.do("GET", "/v1/uploads/"+id+"/errors?limit=2&offset=3", nil)
	r.json(t, &errs)
	if len(errs) != 1 || errs[0]["file"] != "c.yaml" || r.header.Get("Pagination-Count") != "1" {
		t.Fatalf("errors page: %s", r.body)
	}
	for _, q := range []string{"limit=1001", "limit=0", "offset=-2"} {
		e.do("GET", "/v1/uploads/"+id+"/errors?"+q, nil).problem(t, 400)
	}
	e.do("GET", "/v1/uploads/"+id+"/files/b.txt", nil).problem(t, 409)
	if r := e.do("GET", "/metrics", nil); !bytes.Contains(r.body, []byte("berth_uploads_processing_duration_seconds_count 1")) {
		t.Fatal("processing duration not observed")
	}
	// Every file's outcome is counted by kind.
	r = e.do("GET", "/metrics", nil)
	for _, want := range []string{
		`berth_uploads_files_processed_total{kind="image-archive",outcome="unsupported"} 1`,
		`berth_uploads_files_processed_total{kind="quadlet",outcome="unsupported"} 1`,
		`berth_uploads_files_processed_total{kind="kube",outcome="unsupported"} 1`,
		`berth_uploads_files_processed_total{kind="other",outcome="unsupported"} 1`,
	} {
		if !bytes.Contains(r.body, []byte(want)) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func testLimits(t *testing.T, e *env) {
	id := e.create()
	base := "/v1/uploads/" + id + "/files/"
	nothingLeft := func(want int) {
		t.Helper()
		if got := e.treeContents(id); len(got) != want {
			t.Fatalf("tree holds %v, want %d files", got, want)
		}
	}
	// Declared too large: refused before reading.
	p := e.put(id, "big", strings.Repeat("x", 101)).problem(t, 413)
	if p["limit"] != "maxFileSize" {
		t.Fatalf("413: %v", p)
	}
	// Too large without a declared length (chunked): cut off while streaming.
	e.putChunked(base+"chunked", io.MultiReader(strings.NewReader(strings.Repeat("y", 60)), strings.NewReader(strings.Repeat("y", 60)))).problem(t, 413)
	nothingLeft(0)

	e.mustPut(id, "a", strings.Repeat("a", 100))
	e.mustPut(id, "b", strings.Repeat("b", 100))
	if p := e.put(id, "c", strings.Repeat("c", 51)).problem(t, 413); p["limit"] != "maxUploadSize" {
		t.Fatalf("upload size: %v", p)
	}
	// Without a declared length the stream is cut at the room left in the upload.
	if p := e.putChunked(base+"c", io.MultiReader(strings.NewReader(strings.Repeat("c", 30)), strings.NewReader(strings.Repeat("c", 30)))).problem(t, 413); p["limit"] != "maxUploadSize" {
		t.Fatalf("chunked over upload size: %v", p)
	}
	nothingLeft(2)
	e.mustPut(id, "c", strings.Repeat("c", 50))
	if p := e.put(id, "d", "").problem(t, 413); p["limit"] != "maxFiles" {
		t.Fatalf("file count: %v", p)
	}
	// Replacing frees the old size; deleting frees room.
	e.mustPut(id, "a", strings.Repeat("a", 10))
	e.mustPut(id, "b", strings.Repeat("b", 100))
	if r := e.do("DELETE", base+"c", nil); r.status != 204 {
		t.Fatal(r.status)
	}
	e.mustPut(id, "x/y/z", "z")
	if p := e.put(id, "x/y/z/w", "w").problem(t, 413); p["limit"] != "maxPathDepth" {
		t.Fatalf("depth: %v", p)
	}
	if p := e.put(id, strings.Repeat("n", 41), "w").problem(t, 413); p["limit"] != "maxPathLength" {
		t.Fatalf("path length: %v", p)
	}
	nothingLeft(3)

	// A client that announces more than it sends and hangs up leaves nothing behind.
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	idT := e.create()
	fmt.Fprintf(conn, "PUT /v1/uploads/%s/files/truncated HTTP/1.1\r\nHost: test\r\nContent-Type: application/octet-stream\r\nContent-Length: 90\r\n\r\nabc", idT)
	_ = conn.(*net.TCPConn).CloseWrite()
	if res, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		resp{res.StatusCode, res.Header, b}.problem(t, 400)
	}
	conn.Close()
	if r := e.do("GET", "/v1/uploads/"+idT+"/files/truncated", nil); r.status != 404 {
		t.Fatalf("truncated PUT stored a file: %d %s", r.status, r.body)
	}
	if got := e.treeContents(idT); len(got) != 0 {
		t.Fatalf("truncated PUT left %v", got)
	}

	// Concurrent writers cannot overshoot the upload size together.
	id2 := e.create()
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for i := 0; i < 12; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.put(id2, fmt.Sprintf("f%d", i), strings.Repeat("q", 60))
			mu.Lock()
			codes[r.status]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if codes[204] != 3 || codes[413] != 9 {
		t.Fatalf("concurrent PUTs: %v", codes)
	}
	if got := e.treeContents(id2); len(got) != 3 {
		t.Fatalf("concurrent PUTs left %v", got)
	}
}

// A PUT whose body is still streaming when the upload is marked for processing is
// refused (409) and leaves the file as it was, even when it replaces the file with one
// of the same or a smaller size.
func TestPutRacingMarkForProcessing(t *testing.T) {
	for name, open := range storetest.Backends(t) {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, envOpts{open: open})
			for _, replacement := range []string{"same", "sm", ""} {
				id := e.create()
				e.mustPut(id, "f", "orig")
				pr, pw := io.Pipe()
				req, _ := http.NewRequest("PUT", e.base+"/v1/uploads/"+id+"/files/f", pr)
				req.Header.Set("Content-Type", "application/octet-stream")
				req.ContentLength = int64(len(replacement))
				if replacement == "" {
					req.ContentLength = -1
				}
				done := make(chan resp, 1)
				go func() {
					res, err := http.DefaultClient.Do(req)
					if err != nil {
						done <- resp{status: -1, body: []byte(err.Error())}
						return
					}
					b, _ := io.ReadAll(res.Body)
					res.Body.Close()
					done <- resp{res.StatusCode, res.Header, b}
				}()
				half := len(replacement) / 2
				if _, err := pw.Write([]byte(replacement[:half])); err != nil && half > 0 {
					t.Fatal(err)
				}
				time.Sleep(50 * time.Millisecond) // the request is past its state check
				if r := e.do("POST", "/v1/uploads/"+id+"/markForProcessing", nil); r.status != 202 {
					t.Fatalf("mark: %d %s", r.status, r.body)
				}
				_, _ = pw.Write([]byte(replacement[half:]))
				pw.Close()
				p := (<-done).problem(t, 409)
				if p["state"] != "pending" {
					t.Fatalf("replacement %q: %v", replacement, p)
				}
				got, err := os.ReadFile(filepath.Join(e.dataDir, "uploads", id, "files", "f"))
				if err != nil || string(got) != "orig" {
					t.Fatalf("replacement %q: file holds %q (%v) after the refused PUT", replacement, got, err)
				}
			}
		})
	}
}

func TestAuth(t *testing.T) {
	e := newEnv(t, envOpts{tokens: []string{"s3cret-token", "second"}})
	id := e.create()
	e.token = ""
	for _, h := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", "Basic czNjcmV0LXRva2Vu"}, {"Authorization", "s3cret-token"}, {"Authorization", "Bearer s3cret-toke"}, {"Authorization", "Bearer "}} {
		for _, target := range []string{"/v1/uploads", "/v1/uploads/" + id, "/v1/uploads/" + id + "/files/a", "/v1/uploads/not-a-uuid"} {
			r := e.do("GET", target, nil, h...)
			r.problem(t, 401)
			if r.header.Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
		}
	}
	for _, tok := range []string{"s3cret-token", "second"} {
		if r := e.do("GET", "/v1/uploads/"+id, nil, "Authorization", "Bearer "+tok); r.status != 200 {
			t.Fatalf("token %q: %d", tok, r.status)
		}
	}
	for _, open := range []string{"/healthz", "/readyz", "/metrics"} {
		if r := e.do("GET", open, nil); r.status != 200 {
			t.Fatalf("%s without token: %d", open, r.status)
		}
	}

	f := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(f, []byte("# comment\n\n  tok-a  \ntok-b\n"), 0o600)
	if toks, err := auth.LoadTokens(f); err != nil || strings.Join(toks, ",") != "tok-a,tok-b" {
		t.Fatalf("LoadTokens = %v, %v", toks, err)
	}
	os.WriteFile(f, []byte("# only a comment\n"), 0o600)
	if _, err := auth.LoadTokens(f); err == nil {
		t.Fatal("empty tokens file accepted")
	}
}

// Without tokens no header is needed.
func TestNoAuth(t *testing.T) {
	e := newEnv(t, envOpts{})
	if r := e.do("GET", "/v1/uploads", nil); r.status != 200 {
		t.Fatalf("%d", r.status)
	}
}

// testImages drives the processing through the store (as the worker does) to check the
// images endpoint in each state, its paging and the upload's images counter.
func testImages(t *testing.T, e *env) {
	ctx := context.Background()
	id := e.create()
	uid := uuid.MustParse(id)
	images := "/v1/uploads/" + id + "/images"
	if p := e.do("GET", images, nil).problem(t, 409); p["state"] != "open" || p["type"] != "urn:berth:problem:invalid-state" {
		t.Fatalf("images while open: %v", p)
	}
	e.do("GET", "/v1/uploads/1b4e28ba-2fa1-11d2-883f-0016d3cca427/images", nil).problem(t, 404)
	e.do("GET", "/v1/uploads/nope/images", nil).problem(t, 400)
	e.mustPut(id, "a.tar", "x")
	e.mustPut(id, "b.tar.gz", "y")
	if r := e.do("POST", "/v1/uploads/"+id+"/markForProcessing", nil); r.status != 202 {
		t.Fatalf("mark: %d %s", r.status, r.body)
	}
	if p := e.do("GET", images, nil).problem(t, 409); p["state"] != "pending" {
		t.Fatalf("images while pending: %v", p)
	}
	if _, ok, err := e.store.Claim(ctx, "w", time.Minute); !ok || err != nil {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if err := e.store.SetTotal(ctx, uid, "w", 2); err != nil {
		t.Fatal(err)
	}
	r := e.do("GET", images, nil)
	if r.status != 200 || strings.TrimSpace(string(r.body)) != "[]" || r.header.Get("Pagination-Total") != "0" {
		t.Fatalf("images while processing, none yet: %d %s %v", r.status, r.body, r.header)
	}
	var u upload
	e.do("GET", "/v1/uploads/"+id, nil).json(t, &u)
	if u.Images == nil || *u.Images != 0 {
		t.Fatalf("upload while processing: %s", e.do("GET", "/v1/uploads/"+id, nil).body)
	}
	var a []store.DeployedImage
	for i := range 3 {
		a = append(a, store.DeployedImage{File: "a.tar", Name: fmt.Sprintf("localhost/a%d:latest", i)})
	}
	if err := e.store.RecordFile(ctx, uid, "w", 0, nil, a, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := e.store.RecordFile(ctx, uid, "w", 1, nil, []store.DeployedImage{{File: "b.tar.gz", Name: "localhost/b:1"}}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Finish(ctx, uid, "w"); err != nil {
		t.Fatal(err)
	}
	r = e.do("GET", images, nil)
	var got []map[string]string
	r.json(t, &got)
	if r.status != 200 || len(got) != 4 || got[0]["file"] != "a.tar" || got[0]["name"] != "localhost/a0:latest" || got[3]["file"] != "b.tar.gz" || got[3]["name"] != "localhost/b:1" ||
		r.header.Get("Pagination-Total") != "4" || r.header.Get("Pagination-Limit") != "100" || r.header.Get("Pagination-Count") != "4" {
		t.Fatalf("images when done: %d %s %v", r.status, r.body, r.header)
	}
	r = e.do("GET", images+"?limit=2&offset=1", nil)
	r.json(t, &got)
	if len(got) != 2 || got[0]["name"] != "localhost/a1:latest" || got[1]["name"] != "localhost/a2:latest" ||
		r.header.Get("Pagination-Offset") != "1" || r.header.Get("Pagination-Limit") != "2" || r.header.Get("Pagination-Total") != "4" {
		t.Fatalf("images page: %s %v", r.body, r.header)
	}
	if r := e.do("GET", images+"?limit=1000", nil); r.status != 200 {
		t.Fatalf("limit=1000: %d", r.status)
	}
	for _, q := range []string{"limit=1001", "limit=0", "offset=-1", "limit=x"} {
		e.do("GET", images+"?"+q, nil).problem(t, 400)
	}
	e.do("GET", "/v1/uploads/"+id, nil).json(t, &u)
	if u.Status != "done" || u.Images == nil || *u.Images != 4 {
		t.Fatalf("done upload: %+v", u)
	}
	if r := e.do("DELETE", "/v1/uploads/"+id, nil); r.status != 204 {
		t.Fatalf("delete: %d", r.status)
	}
	e.do("GET", images, nil).problem(t, 404)
}
