package containerio_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containers/storage/pkg/reexec"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
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
	enginetest.RequireRuntime(t, "container stream tests")
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
	addr, stop := enginetest.Serve(t, filepath.Join(dir, "r"), filepath.Join(dir, "s"))
	return &testEngine{t: t, addr: addr, prefix: "/v4.3.1/libpod", client: &http.Client{}}, stop
}

// unmountUnder lazily unmounts whatever is still mounted below dir, a few
// rounds in case a mount appeared while the engine was shutting down.
func unmountUnder(dir string) { enginetest.UnmountUnder(dir, 3) }

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

func (te *testEngine) removeAll() { enginetest.RemoveAll(te.do) }

// do sends a request; a non-nil body that is not an io.Reader is sent as JSON.
func (te *testEngine) do(method, path string, body any) (int, []byte) {
	te.t.Helper()
	return enginetest.Do(te.t, te.client, method, te.url(""), path, body)
}

// must sends a request and fails unless the answer has the wanted status.
func (te *testEngine) must(want int, method, path string, body any) []byte {
	te.t.Helper()
	return enginetest.Must(te.t, te.do, want, method, path, body)
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
