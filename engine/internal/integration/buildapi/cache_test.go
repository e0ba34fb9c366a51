package buildapi

import (
	"crypto/rand"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/tartest"
	"github.com/berth-project/berth/shared/syncbuf"
)

// TestBigContextCachedRebuild builds the benchmark's context (a 20 MiB
// file COPY'd, three RUNs): a nocache build records its steps for later
// builds, a rebuild of the same bytes is answered from the cache in well
// under a second, and one changed byte in the big file reruns the COPY and
// everything after it.
func TestBigContextCachedRebuild(t *testing.T) {
	var log syncbuf.Buffer
	e := startEngineLogging(t, slog.New(slog.NewTextHandler(&log, nil)))
	big := make([]byte, 20<<20)
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	const containerfile = "FROM localhost/busybox\nCOPY big /big\nRUN wc -c /big > /size\nRUN echo two > /two\nRUN cat /size /two > /both\nCMD [\"cat\", \"/both\"]\n"
	files := map[string]string{"Containerfile": containerfile, "big": string(big)}
	tarball := tartest.Files(t, files)
	query := url.Values{"layers": {"1"}, "t": {"bigctx"}}

	cold := e.buildTar(tarball, url.Values{"layers": {"1"}, "t": {"bigctx"}, "nocache": {"1"}})
	if cold.status != http.StatusOK || cold.err != "" || strings.Contains(cold.output, "Using cache") {
		t.Fatalf("cold build: %d %q\n%s", cold.status, cold.err, cold.output)
	}
	t.Logf("cold: %s", log.LastLine("build finished"))

	var best time.Duration
	for i := 0; i < 3; i++ {
		start := time.Now()
		cached := e.buildTar(tarball, query)
		took := time.Since(start)
		if cached.id != cold.id || strings.Count(cached.output, "Using cache") != 5 {
			t.Fatalf("cached rebuild made %s (cold %s):\n%s", cached.id, cold.id, cached.output)
		}
		if best == 0 || took < best {
			best = took
		}
		t.Logf("cached rebuild %v: %s", took, log.LastLine("build finished"))
	}
	// The target is 0.2 s on an idle machine; shared test machines get
	// a margin.
	if best > 2*time.Second {
		t.Fatalf("a fully cached rebuild of a 20 MiB context took %v", best)
	}

	big[len(big)/2] ^= 0xff
	files["big"] = string(big)
	changed := e.buildTar(tartest.Files(t, files), query)
	if changed.status != http.StatusOK || changed.err != "" {
		t.Fatalf("rebuild after a changed byte: %d %q", changed.status, changed.err)
	}
	before, after, _ := strings.Cut(changed.output, "COPY big /big")
	if strings.Count(before, "Using cache") != 0 || strings.Contains(after, "Using cache") || changed.id == cold.id {
		t.Fatalf("one changed byte did not rerun the COPY and what follows:\n%s", changed.output)
	}
	t.Logf("changed byte: %s", log.LastLine("build finished"))
}
