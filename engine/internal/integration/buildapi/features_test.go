package buildapi

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/testsupport/tartest"
)

// gzipTar is a gzip-compressed tar of files.
func gzipTar(t *testing.T, files map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(tartest.Files(t, files))
	zw.Close()
	return buf.String()
}

func TestBuildAddGlobsHeredocsAndRunMounts(t *testing.T) {
	e := startEngine(t)
	files := map[string]string{
		"Containerfile": `FROM localhost/busybox
ADD bundle.tar.gz /opt/bundle/
COPY src/*.txt /globbed/
COPY <<EOF /etc/greeting
hello from a heredoc
EOF
RUN <<EOF
echo heredoc-run > /heredoc-run
EOF
RUN --mount=type=bind,source=src,target=/mnt/src cat /mnt/src/a.txt > /from-bind
RUN --mount=type=cache,target=/cache echo cached >> /cache/log && wc -l < /cache/log > /cache-lines
SHELL ["/bin/sh", "-ec"]
RUN test -f /opt/bundle/inner/file && test -f /globbed/a.txt && test -f /globbed/b.txt && test ! -e /globbed/c.md
RUN cat /etc/greeting /heredoc-run /from-bind /opt/bundle/inner/file /cache-lines
`,
		"bundle.tar.gz": gzipTar(t, map[string]string{"inner/file": "unpacked"}),
		"src/a.txt":     "bound-a",
		"src/b.txt":     "b",
		"src/c.md":      "c",
	}
	res := e.build(files, url.Values{"t": {"features"}, "format": {"docker"}})
	if res.status != http.StatusOK || res.err != "" {
		t.Fatalf("build: %d %q\n%s", res.status, res.err, res.output)
	}
	for _, want := range []string{"hello from a heredoc", "heredoc-run", "bound-a", "unpacked"} {
		if !strings.Contains(res.output, want) {
			t.Fatalf("output lacks %q:\n%s", want, res.output)
		}
	}
	if strings.Contains(res.output, "WARN") {
		t.Fatalf("the docker format warned:\n%s", res.output)
	}
	// The cache mount persists between builds: a second build without the
	// layer cache sees the line the first one wrote.
	again := e.build(files, url.Values{"t": {"features"}, "format": {"docker"}, "nocache": {"1"}})
	if again.err != "" || !strings.Contains(again.output, "unpacked2\n") {
		t.Fatalf("second build: %q\n%s", again.err, again.output)
	}
}
