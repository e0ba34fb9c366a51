package containerio_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containers/storage/pkg/reexec"

	"github.com/berth-project/berth/engine/internal/engine"
	"github.com/berth-project/berth/engine/internal/testdeadline"
	"github.com/berth-project/berth/engine/testimage"
)

func TestMain(m *testing.M) {
	if reexec.Init() {
		return
	}
	os.Exit(m.Run())
}

// requireRuntime skips (or fails under BERTH_TEST_STRICT=1) without root,
// runc, conmon or busybox-static.
func requireRuntime(t testing.TB) {
	t.Helper()
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	for _, bin := range []string{"runc", "conmon"} {
		if _, err := exec.LookPath(bin); err != nil {
			if _, err := os.Stat("/usr/sbin/" + bin); err != nil {
				missing = append(missing, bin)
			}
		}
	}
	if _, err := os.Stat(testimage.BusyboxPath); err != nil {
		missing = append(missing, "busybox-static")
	}
	if len(missing) == 0 {
		return
	}
	if os.Getenv("BERTH_TEST_STRICT") == "1" {
		t.Fatalf("container stream tests need %s (BERTH_TEST_STRICT=1)", strings.Join(missing, ", "))
	}
	t.Skipf("container stream tests need %s", strings.Join(missing, ", "))
}

// testEngine is an in-process engine serving on a real loopback listener.
type testEngine struct {
	t      testing.TB
	addr   string
	prefix string
	client *http.Client
}

func startEngine(t testing.TB) *testEngine {
	t.Helper()
	testdeadline.Set(t, testdeadline.Default)
	requireRuntime(t)
	// A short directory keeps conmon's and runc's socket paths under the
	// 108-byte limit of unix socket addresses.
	dir, err := os.MkdirTemp("/tmp", "bs")
	if err != nil {
		t.Fatal(err)
	}
	te, stop := openEngine(t, dir)
	t.Cleanup(func() {
		te.removeAll()
		stop()
		unmountUnder(dir)
		os.RemoveAll(dir)
	})
	te.loadBusybox()
	return te
}

// openEngine serves an engine with its state under dir until stop is
// called; containers keep running after stop, as after an engine restart.
func openEngine(t testing.TB, dir string) (*testEngine, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	eng, err := engine.New(ctx, nil, engine.Config{Root: filepath.Join(dir, "r"), RunRoot: filepath.Join(dir, "s"), Runtime: "runc"})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: eng.Handler()}
	go srv.Serve(ln)
	te := &testEngine{t: t, addr: ln.Addr().String(), prefix: "/v4.3.1/libpod", client: &http.Client{}}
	return te, func() {
		srv.Close()
		cancel()
		eng.Close()
	}
}

// unmountUnder lazily unmounts whatever is still mounted below dir, a few
// rounds in case a mount appeared while the engine was shutting down.
func unmountUnder(dir string) {
	for round := 0; round < 3; round++ {
		data, _ := os.ReadFile("/proc/self/mounts")
		var mps []string
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			if len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
				mps = append(mps, f[1])
			}
		}
		if len(mps) == 0 {
			return
		}
		for i := len(mps) - 1; i >= 0; i-- {
			exec.Command("umount", "-l", mps[i]).Run()
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// with returns the engine bound to a subtest, so failures stop that subtest.
func (te *testEngine) with(t testing.TB) *testEngine {
	c := *te
	c.t = t
	return &c
}

func (te *testEngine) url(path string) string { return "http://" + te.addr + te.prefix + path }

func (te *testEngine) loadBusybox() {
	te.t.Helper()
	var buf bytes.Buffer
	img := testimage.Busybox("localhost/busybox:latest", "sh")
	if err := testimage.DockerArchive(&buf, img); err != nil {
		te.t.Fatal(err)
	}
	te.must(http.StatusOK, "POST", "/images/load", &buf)
}

func (te *testEngine) removeAll() {
	status, body := te.do("GET", "/containers/json?all=true", nil)
	if status != http.StatusOK {
		return
	}
	var list []struct {
		ID string `json:"Id"`
	}
	json.Unmarshal(body, &list)
	for _, c := range list {
		te.do("DELETE", "/containers/"+c.ID+"?force=true&timeout=0", nil)
	}
}

// do sends a request; a non-nil body that is not an io.Reader is sent as JSON.
func (te *testEngine) do(method, path string, body any) (int, []byte) {
	te.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case io.Reader:
		r = b
	default:
		data, err := json.Marshal(b)
		if err != nil {
			te.t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, te.url(path), r)
	if err != nil {
		te.t.Fatal(err)
	}
	resp, err := te.client.Do(req)
	if err != nil {
		te.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// must sends a request and fails unless the answer has the wanted status.
func (te *testEngine) must(want int, method, path string, body any) []byte {
	te.t.Helper()
	status, data := te.do(method, path, body)
	if status != want {
		te.t.Fatalf("%s %s: status %d, want %d: %s", method, path, status, want, data)
	}
	return data
}

func (te *testEngine) create(spec map[string]any) string {
	te.t.Helper()
	if _, ok := spec["image"]; !ok {
		spec["image"] = "busybox"
	}
	var out struct {
		ID string `json:"Id"`
	}
	json.Unmarshal(te.must(http.StatusCreated, "POST", "/containers/create", spec), &out)
	return out.ID
}

func (te *testEngine) start(id string) {
	te.t.Helper()
	te.must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
}

func (te *testEngine) wait(id string) int32 {
	te.t.Helper()
	var code int32
	if err := json.Unmarshal(te.must(http.StatusOK, "POST", "/containers/"+id+"/wait", nil), &code); err != nil {
		te.t.Fatal(err)
	}
	return code
}

// hijacked is a client end of an attach or exec connection.
type hijacked struct {
	conn   net.Conn
	reader *bufio.Reader
	status int
	header http.Header
}

// hijack sends a request the way Podman's client does (asking for an
// upgrade) and returns the connection after the response head.
func (te *testEngine) hijack(method, path string, body []byte, upgrade bool) *hijacked {
	te.t.Helper()
	conn, err := net.Dial("tcp", te.addr)
	if err != nil {
		te.t.Fatal(err)
	}
	te.t.Cleanup(func() { conn.Close() })
	var req bytes.Buffer
	fmt.Fprintf(&req, "%s %s%s HTTP/1.1\r\nHost: d\r\nContent-Length: %d\r\n", method, te.prefix, path, len(body))
	if upgrade {
		req.WriteString("Connection: Upgrade\r\nUpgrade: tcp\r\n")
	}
	if len(body) > 0 {
		req.WriteString("Content-Type: application/json\r\n")
	}
	req.WriteString("\r\n")
	req.Write(body)
	if _, err := conn.Write(req.Bytes()); err != nil {
		te.t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(60 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		te.t.Fatalf("%s %s: %v", method, path, err)
	}
	return &hijacked{conn: conn, reader: br, status: resp.StatusCode, header: resp.Header}
}
