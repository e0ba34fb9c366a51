package buildapi

import (
	"net"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestBuildPullRetries: Podman 5 and 6 send retry, retry-delay and their
// compression options with every build. A FROM pull that fails for want
// of an answer is tried again that many times, that far apart, and the
// stream says so; retry=0 tries once; the compression options of a build
// into the engine's store are accepted.
func TestBuildPullRetries(t *testing.T) {
	e := startEngine(t)
	// A registry address where nothing listens: each pull fails at once.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	files := map[string]string{"Containerfile": "FROM " + addr + "/nothing/here:1\n"}
	query := func(retry string) url.Values {
		return url.Values{"t": {"retry:1"}, "retry": {retry}, "retry-delay": {"300ms"}, "tlsVerify": {"false"},
			"compressionFormat": {"zstd:chunked"}, "compressionLevel": {"3"}, "forceCompressionFormat": {"0"}, "skipunusedstages": {"1"}}
	}

	start := time.Now()
	res := e.build(files, query("2"))
	took := time.Since(start)
	if res.err == "" {
		t.Fatalf("a build FROM an address where nothing listens succeeded: %s", res.output)
	}
	for _, want := range []string{"retrying in 300ms (1/2)", "retrying in 300ms (2/2)"} {
		if !strings.Contains(res.output, want) {
			t.Errorf("the stream does not say %q:\n%s", want, res.output)
		}
	}
	if strings.Contains(res.output, "(3/2)") || took < 600*time.Millisecond {
		t.Errorf("two retries 300ms apart took %v:\n%s", took, res.output)
	}

	res = e.build(files, query("0"))
	if res.err == "" || strings.Contains(res.output, "retrying") {
		t.Errorf("retry=0: error %q, output:\n%s", res.err, res.output)
	}

	// A definitive answer is not tried again: an image that is not there
	// under pull policy never fails at once.
	res = e.build(map[string]string{"Containerfile": "FROM localhost/no-such-image-here:1\n"}, url.Values{"retry": {"3"}, "retry-delay": {"5s"}, "pullpolicy": {"never"}})
	if res.err == "" || strings.Contains(res.output, "retrying") {
		t.Errorf("pull policy never: error %q, output:\n%s", res.err, res.output)
	}
}
