package imagesapi

import (
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/testimage"
)

// TestPullPushRetries: podman pull and push --retry N --retry-delay D
// (retry and retryDelay, which the engine did not read before) try a copy
// that failed for want of an answer again N times, D apart, and the stream
// says so; a definitive answer is final at once; a negative retry or a
// delay that is no duration is a 400 naming it.
func TestPullPushRetries(t *testing.T) {
	e := startEngine(t)
	e.load(testimage.Image{RepoTags: []string{"localhost/retry:1"}, Layers: []testimage.Layer{{Files: []testimage.File{{Path: "f", Data: []byte("x")}}}}})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nowhere := l.Addr().String()
	l.Close()
	// A pull's stream says so; a push's progress is held until a blob
	// moves, so its failure comes as one error answer, after the tries.
	for _, c := range []struct {
		what, path string
		says       bool
	}{
		{"pull", "/v5.0.0/libpod/images/pull?tlsVerify=false&reference=" + url.QueryEscape(nowhere+"/x/y:1"), true},
		{"push", "/v5.0.0/libpod/images/localhost%2Fretry:1/push?tlsVerify=false&quiet=false&destination=" + url.QueryEscape(nowhere+"/x/y:1"), false},
	} {
		start := time.Now()
		res := e.do(http.MethodPost, c.path+"&retry=2&retryDelay=300ms", nil)
		took := time.Since(start)
		body := string(res.body)
		for _, want := range []string{"retrying in 300ms (1/2)", "retrying in 300ms (2/2)"} {
			if c.says && !strings.Contains(body, want) {
				t.Errorf("%s: the answer does not say %q: %d %s", c.what, want, res.status, body)
			}
		}
		if strings.Contains(body, "(3/2)") || took < 600*time.Millisecond || !strings.Contains(body, "connection refused") {
			t.Errorf("%s: two retries 300ms apart took %v: %s", c.what, took, body)
		}
		start = time.Now()
		if res := e.do(http.MethodPost, c.path+"&retryDelay=2s", nil); strings.Contains(string(res.body), "retrying") || time.Since(start) > 1500*time.Millisecond {
			t.Errorf("%s without retry tried again (%v): %s", c.what, time.Since(start), res.body)
		}
		for query, field := range map[string]string{"&retry=-1": "retry", "&retry=1&retryDelay=soon": "retryDelay"} {
			if res := e.do(http.MethodPost, c.path+query, nil); res.status != http.StatusBadRequest || !strings.Contains(string(res.body), field) {
				t.Errorf("%s%s: %d %s, want a 400 naming %s", c.what, query, res.status, res.body, field)
			}
		}
	}
	// A definitive answer is not tried again: no such image to push.
	start := time.Now()
	res := e.do(http.MethodPost, "/v5.0.0/libpod/images/localhost%2Fnothere:1/push?retry=3&retryDelay=5s&destination="+url.QueryEscape(nowhere+"/x:1"), nil)
	if res.status != http.StatusNotFound || time.Since(start) > 4*time.Second {
		t.Errorf("push of an image that is not there: %d %s after %v", res.status, res.body, time.Since(start))
	}
}
