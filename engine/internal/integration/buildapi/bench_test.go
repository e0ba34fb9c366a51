package buildapi

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/benchtest"
	"github.com/berth-project/berth/engine/internal/testsupport/tartest"
	"github.com/berth-project/berth/engine/testimage"
)

// benchContext is the 6-step build of the benchmark: FROM busybox, COPY a
// 20 MiB file, three RUNs, CMD.
func benchContext(b *testing.B) []byte {
	big := make([]byte, 20<<20)
	if _, err := rand.Read(big); err != nil {
		b.Fatal(err)
	}
	return tartest.Files(b, map[string]string{
		"Containerfile": "FROM localhost/busybox\nCOPY big /big\nRUN wc -c /big > /size\nRUN echo two > /two\nRUN cat /size /two > /both\nCMD [\"cat\", \"/both\"]\n",
		"big":           string(big),
	})
}

// timedBuild posts a build to base and returns how long the whole stream took.
func timedBuild(b *testing.B, client *http.Client, base string, tarball []byte, query url.Values) time.Duration {
	b.Helper()
	start := time.Now()
	req, err := http.NewRequest(http.MethodPost, base+"/v4.3.1/libpod/build?"+query.Encode(), bytes.NewReader(tarball))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-tar")
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	if resp.StatusCode != http.StatusOK || bytes.Contains(body, []byte(`"error"`)) {
		b.Fatalf("build on %s: %d %s", base, resp.StatusCode, body)
	}
	return took
}

// BenchmarkBuildVsPodman builds the same context on berth-engine and on
// the Podman 4.3.1 service of hack/bench.sh, cold (nocache) and fully
// cached, alternating, and reports the times and the cold ratio.
func BenchmarkBuildVsPodman(b *testing.B) {
	e, client, podmanBase := startBuildPeers(b)
	query := url.Values{"layers": {"1"}, "t": {"bench-build"}}
	if n, p := os.Getenv("BERTH_BENCH_RLIMIT_NOFILE"), os.Getenv("BERTH_BENCH_RLIMIT_NPROC"); n != "" && p != "" {
		query.Set("ulimits", fmt.Sprintf(`["nofile=%s:%s","nproc=%s:%s"]`, n, n, p, p))
	}
	cold := url.Values{"nocache": {"1"}}
	for k, v := range query {
		cold[k] = v
	}
	tarball := benchContext(b)
	var berthCold, podmanCold, berthCached, podmanCached time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		berthCold += timedBuild(b, e.Client, e.Base(), tarball, cold)
		podmanCold += timedBuild(b, client, podmanBase, tarball, cold)
		berthCached += timedBuild(b, e.Client, e.Base(), tarball, query)
		podmanCached += timedBuild(b, client, podmanBase, tarball, query)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(berthCold.Seconds()/n, "berth-cold-s")
	b.ReportMetric(podmanCold.Seconds()/n, "podman-cold-s")
	b.ReportMetric(berthCold.Seconds()/podmanCold.Seconds(), "cold-ratio")
	b.ReportMetric(berthCached.Seconds()/n, "berth-cached-s")
	b.ReportMetric(podmanCached.Seconds()/n, "podman-cached-s")
}

// smallContext is a small Containerfile, as the cold-build goal measures
// it: FROM busybox, an ENV, two RUNs, a WORKDIR and a CMD, no files.
func smallContext(b *testing.B) []byte {
	return tartest.Files(b, map[string]string{
		"Containerfile": "FROM localhost/busybox\nENV GREETING=hello\nRUN echo $GREETING > /greeting\nWORKDIR /app\nRUN cp /greeting /app/greeting\nCMD [\"cat\", \"/app/greeting\"]\n",
	})
}

// BenchmarkSmallBuildVsPodman builds the small Containerfile cold
// (nocache) on berth-engine and on the Podman 4.3.1 service of
// hack/bench.sh, alternating, 5 pairs per iteration, and reports the
// medians and berth's as a fraction of Podman's (goal: at most 0.5).
func BenchmarkSmallBuildVsPodman(b *testing.B) {
	e, client, podmanBase := startBuildPeers(b)
	cold := url.Values{"nocache": {"1"}, "layers": {"1"}, "t": {"bench-small"}}
	if n, p := os.Getenv("BERTH_BENCH_RLIMIT_NOFILE"), os.Getenv("BERTH_BENCH_RLIMIT_NPROC"); n != "" && p != "" {
		cold.Set("ulimits", fmt.Sprintf(`["nofile=%s:%s","nproc=%s:%s"]`, n, n, p, p))
	}
	tarball := smallContext(b)
	// One build each first: what a first build sets up once is not a cold build's cost.
	timedBuild(b, e.Client, e.Base(), tarball, cold)
	timedBuild(b, client, podmanBase, tarball, cold)
	bs, ps := benchtest.Alternate(b, 5, [2]time.Duration{200 * time.Millisecond, 500 * time.Millisecond},
		func(int) time.Duration { return timedBuild(b, e.Client, e.Base(), tarball, cold) },
		func(int) time.Duration { return timedBuild(b, client, podmanBase, tarball, cold) })
	load, _ := os.ReadFile("/proc/loadavg")
	benchtest.Report(b, "cold build of a small Containerfile (load "+strings.Join(strings.Fields(string(load))[:3], " ")+")", "goal <= 0.5", "builds", bs, ps)
}

// startBuildPeers starts a Berth engine and loads the same busybox image
// into it (startEngine does) and into the Podman 4.3.1 service of
// hack/bench.sh; it answers the engine, a client and Podman's base URL.
func startBuildPeers(b *testing.B) (*testEngine, *http.Client, string) {
	b.Helper()
	podmanBase := "http://" + strings.TrimPrefix(benchtest.PodmanURL(b), "tcp://")
	e := startEngine(b)
	client := &http.Client{Timeout: 5 * time.Minute}
	var archive bytes.Buffer
	if err := testimage.DockerArchive(&archive, testimage.Busybox("localhost/busybox:latest")); err != nil {
		b.Fatal(err)
	}
	resp, err := client.Post(podmanBase+"/v4.3.1/libpod/images/load", "application/x-tar", &archive)
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return e, client, podmanBase
}
