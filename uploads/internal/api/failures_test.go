package api_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-project/berth/uploads/internal/files"
	"github.com/berth-project/berth/uploads/internal/store"
	"github.com/berth-project/berth/uploads/internal/store/storetest"
)

// smallDisk mounts a tmpfs of size bytes on a new directory and unmounts it when the test
// ends. It needs root (the test machines run as root); elsewhere the test is skipped
// unless BERTH_TEST_STRICT=1.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "berth-test-full", dir).CombinedOutput(); err != nil {
		if os.Getenv("BERTH_TEST_STRICT") == "1" {
			t.Fatalf("mount a tmpfs: %v %s", err, out)
		}
		t.Skipf("mount a tmpfs (needs root): %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// fill writes a file into dir until the file system refuses (ENOSPC) and returns it.
func fill(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	// Then byte by byte for the last partial block.
	for {
		if _, err := f.Write(buf[:1]); err != nil {
			break
		}
	}
	return p
}

func readyz(t *testing.T, e *env) (int, map[string]string) {
	t.Helper()
	r := e.do("GET", "/readyz", nil)
	var body struct {
		Checks map[string]string `json:"checks"`
	}
	r.json(t, &body)
	return r.status, body.Checks
}

// On a full disk (the default SQLite database in the data directory, as it is with one
// replica): a PUT answers 507 with a message and leaves nothing; /readyz says why; DELETE
// of a file and of an upload still work and free space even once another writer took the
// last byte; writes resume when space returns.
func TestFullDisk(t *testing.T) {
	mnt := smallDisk(t, "16m")
	dataDir := filepath.Join(mnt, "data")
	if err := os.Mkdir(dataDir, 0o750); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), "", dataDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	space := files.NewSpace(dataDir, 2<<20)
	if err := space.Refill(); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOpts{st: st, dataDir: dataDir, space: space})
	full, other := e.create(), e.create()
	e.mustPut(other, "keep", "kept")

	// A body of unknown length larger than the disk: refused when the disk runs out.
	p := e.putChunked("/v1/uploads/"+full+"/files/huge", io.LimitReader(zeros{}, 64<<20)).problem(t, http.StatusInsufficientStorage)
	if p["type"] != "urn:berth:problem:insufficient-storage" || !strings.Contains(p["detail"].(string), "full") {
		t.Fatalf("507 problem %v", p)
	}
	if left := e.treeContents(full); len(left) != 0 {
		t.Fatalf("a refused write left %v", left)
	}

	// Files of known length until the headroom is reached.
	var stored int
	for i := 0; ; i++ {
		r := e.put(full, "f"+string(rune('a'+i)), strings.Repeat("x", 1<<20))
		if r.status == http.StatusInsufficientStorage {
			p := r.problem(t, http.StatusInsufficientStorage)
			if !strings.Contains(p["detail"].(string), "bytes free") {
				t.Fatalf("507 detail %v", p["detail"])
			}
			break
		}
		if r.status != http.StatusNoContent || i > 20 {
			t.Fatalf("PUT %d: %d %s", i, r.status, r.body)
		}
		stored++
	}

	// Another writer takes every byte left: deletes still work.
	filler := fill(t, mnt)
	if status, checks := readyz(t, e); status != http.StatusServiceUnavailable || !strings.Contains(checks["disk"], "full") || checks["database"] != "ok" {
		t.Fatalf("/readyz on a full disk: %d %v", status, checks)
	}
	if r := e.do("DELETE", "/v1/uploads/"+full+"/files/fa", nil); r.status != http.StatusNoContent {
		t.Fatalf("DELETE of a file on a full disk: %d %s", r.status, r.body)
	}
	fill(t, mnt)
	if r := e.do("DELETE", "/v1/uploads/"+full, nil); r.status != http.StatusNoContent {
		t.Fatalf("DELETE of an upload on a full disk: %d %s", r.status, r.body)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "uploads", full)); !os.IsNotExist(err) {
		t.Fatalf("the deleted upload's tree: %v", err)
	}
	if r := e.do("GET", "/v1/uploads/"+full, nil); r.status != http.StatusNotFound {
		t.Fatalf("GET of the deleted upload: %d", r.status)
	}

	// Space returns: writes resume, /readyz is green, the reserve is made again.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	e.mustPut(other, "again", strings.Repeat("y", 1<<20))
	if status, checks := readyz(t, e); status != http.StatusOK {
		t.Fatalf("/readyz after space returned: %d %v", status, checks)
	}
	if err := space.Refill(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dataDir, "headroom.reserve")); err != nil || fi.Size() != 2<<20 {
		t.Fatalf("reserve after refill: %v %v", fi, err)
	}
	checkBooks(t, e, other)
	t.Logf("%d MiB stored before 507", stored)
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// proxy forwards TCP connections to a target until stopped; started again, it listens on
// the same address. It stands for a database server that goes away and comes back.
type proxy struct {
	t      *testing.T
	addr   string
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]bool
}

func newProxy(t *testing.T, target string) *proxy {
	p := &proxy{t: t, target: target, conns: map[net.Conn]bool{}}
	p.start("127.0.0.1:0")
	t.Cleanup(p.stop)
	return p
}

func (p *proxy) start(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[up] = true, true
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
}

func (p *proxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

// While PostgreSQL cannot be reached, requests that need it answer 503 with Retry-After
// (a create leaves no tree behind) and /readyz says so; once it is back the same process
// serves again, with nothing restarted.
func TestDatabaseOutage(t *testing.T) {
	base := os.Getenv("BERTH_TEST_POSTGRES_URL")
	if _, ok := storetest.Backends(t)["postgres"]; !ok {
		t.Skip("no PostgreSQL")
	}
	dsn, err := url.Parse(storetest.SchemaURL(t, base))
	if err != nil {
		t.Fatal(err)
	}
	px := newProxy(t, dsn.Host)
	dsn.Host = px.addr
	q := dsn.Query()
	q.Set("connect_timeout", "2")
	dsn.RawQuery = q.Encode()
	st, err := store.Open(context.Background(), dsn.String(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := newEnv(t, envOpts{st: st})
	id := e.create()
	e.mustPut(id, "a", "before")

	px.stop()
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/uploads/" + id, ""},
		{"PUT", "/v1/uploads/" + id + "/files/b", "during"},
		{"POST", "/v1/uploads", ""},
		{"GET", "/v1/uploads", ""},
		{"DELETE", "/v1/uploads/" + id, ""},
		{"POST", "/v1/uploads/" + id + "/markForProcessing", ""},
	} {
		r := e.do(c.method, c.path, strings.NewReader(c.body), "Content-Type", "application/octet-stream")
		p := r.problem(t, http.StatusServiceUnavailable)
		if r.header.Get("Retry-After") != "2" || p["type"] != "urn:berth:problem:database-unavailable" {
			t.Fatalf("%s %s during the outage: %v, Retry-After %q", c.method, c.path, p, r.header.Get("Retry-After"))
		}
	}
	if status, checks := readyz(t, e); status != http.StatusServiceUnavailable || checks["database"] == "ok" {
		t.Fatalf("/readyz during the outage: %d %v", status, checks)
	}
	entries, _ := os.ReadDir(filepath.Join(e.dataDir, "uploads"))
	if len(entries) != 1 { // the upload's tree
		var names []string
		for _, en := range entries {
			names = append(names, en.Name())
		}
		t.Fatalf("trees after a create during the outage: %v", names)
	}

	px.start(px.addr)
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := e.do("GET", "/v1/uploads/"+id, nil)
		if r.status == http.StatusOK {
			var u upload
			r.json(t, &u)
			if u.Status != "open" {
				t.Fatalf("after the outage: %+v", u)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %d %s after the database came back", r.status, r.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.mustPut(id, "b", "after")
	checkBooks(t, e, id)
	if status, _ := readyz(t, e); status != http.StatusOK {
		t.Fatalf("/readyz after the outage: %d", status)
	}
}
