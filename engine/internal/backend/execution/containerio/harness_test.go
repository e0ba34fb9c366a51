package containerio_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

// streamOptions are the options of the stream tests' engines: their
// state lies deeper than the 108-byte limit of unix socket addresses, so
// every attach, exec and terminal test also shows that a long root works.
func streamOptions() enginetest.Options {
	return enginetest.Options{What: "container stream tests", LongDir: true}
}

// testEngine is an in-process engine serving on a real loopback listener.
type testEngine struct{ *enginetest.Engine }

func startEngine(t testing.TB) *testEngine {
	t.Helper()
	return &testEngine{enginetest.Start(t, streamOptions())}
}

// with returns the engine bound to a subtest, so failures stop that subtest.
func (te *testEngine) with(t testing.TB) *testEngine {
	c := *te.Engine
	c.T = t
	return &testEngine{&c}
}

func (te *testEngine) url(path string) string { return te.URL + path }

func (te *testEngine) start(id string) {
	te.T.Helper()
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
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
	te.T.Helper()
	conn, err := net.Dial("tcp", te.Addr)
	if err != nil {
		te.T.Fatal(err)
	}
	te.T.Cleanup(func() { conn.Close() })
	var req bytes.Buffer
	fmt.Fprintf(&req, "%s %s%s HTTP/1.1\r\nHost: d\r\nContent-Length: %d\r\n", method, strings.TrimPrefix(te.URL, te.Base()), path, len(body))
	if upgrade {
		req.WriteString("Connection: Upgrade\r\nUpgrade: tcp\r\n")
	}
	if len(body) > 0 {
		req.WriteString("Content-Type: application/json\r\n")
	}
	req.WriteString("\r\n")
	req.Write(body)
	if _, err := conn.Write(req.Bytes()); err != nil {
		te.T.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(60 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		te.T.Fatalf("%s %s: %v", method, path, err)
	}
	return &hijacked{conn: conn, reader: br, status: resp.StatusCode, header: resp.Header}
}
