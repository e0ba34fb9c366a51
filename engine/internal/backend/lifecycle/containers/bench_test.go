package containers_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/benchtest"
	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/shared/testnet"
)

// The benchmarks compare Berth with Podman 4.3.1 serving the same API on the
// same machine (hack/bench.sh starts it and exports BERTH_BENCH=1,
// BERTH_BENCH_PODMAN_URL and the rlimits its containers may ask for).

// podmanEngine returns a client of the reference Podman service, with the
// busybox test image loaded.
func podmanEngine(b *testing.B) *testEngine {
	return &testEngine{enginetest.AttachPodman(b, benchtest.PodmanURL(b), enginetest.BusyboxImage())}
}

// benchSpec is the create request both engines get. Podman gives containers
// rlimits above this machine's hard limits unless the request carries them.
func benchSpec(cmd ...string) map[string]any {
	return benchtest.Spec(map[string]any{"netns": map[string]string{"nsmode": "none"}}, cmd...)
}

// BenchmarkRunTrueContainer: create + start + wait + remove of a `true`
// container with netns none. Goal: Berth's median at most 0.25x Podman's.
func BenchmarkRunTrueContainer(b *testing.B) {
	benchtest.Require(b)
	// 15 rounds; the pauses let Podman's background work (a "podman
	// container cleanup" process per exit) finish before the next
	// measurement, whichever engine it is for.
	enginetest.CompareRuns(b, "run true container", "goal <= 0.25", 15, [2]time.Duration{200 * time.Millisecond, 500 * time.Millisecond},
		benchSpec("true"), startEngine(b).Engine, podmanEngine(b).Engine)
}

// BenchmarkListContainers100: ListContainers with 100 containers. Goal:
// throughput at least 10x Podman's.
func BenchmarkListContainers100(b *testing.B) {
	benchtest.Require(b)
	berth := startEngine(b)
	podman := podmanEngine(b)
	for _, te := range []*testEngine{berth, podman} {
		for i := 0; i < 100; i++ {
			spec := benchSpec("true")
			spec["labels"] = map[string]string{"bench": "list", "n": strconv.Itoa(i)}
			te.create(spec)
		}
	}
	list := func(te *testEngine) func() float64 {
		return func() float64 {
			return benchtest.ListThroughput(te.URL+"/containers/json?all=true", 100, 2*time.Second)
		}
	}
	benchtest.CompareRates(b, "list 100 containers", "goal >= 10", list(berth), list(podman))
}

// pingLatency returns the median and 99th percentile of n sequential _ping requests.
func pingLatency(url string, n int) (time.Duration, time.Duration) {
	client := &http.Client{}
	var d []time.Duration
	for i := 0; i < n; i++ {
		start := time.Now()
		resp, err := client.Get(url + "/_ping")
		if err != nil {
			continue
		}
		resp.Body.Close()
		d = append(d, time.Since(start))
	}
	slices.Sort(d)
	return d[len(d)/2], d[len(d)*99/100]
}

// BenchmarkPingWith100Running: _ping latency of an idle engine and of one
// with 100 running containers. Goal: the running containers do not slow it.
func BenchmarkPingWith100Running(b *testing.B) {
	benchtest.Require(b)
	te := startEngine(b)
	p50Idle, p99Idle := pingLatency(te.URL, 2000)
	for i := 0; i < 100; i++ {
		id := te.create(benchSpec("sleep", "600"))
		te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	}
	b.ResetTimer()
	var p50, p99 time.Duration
	for i := 0; i < b.N; i++ {
		p50, p99 = pingLatency(te.URL, 2000)
	}
	b.StopTimer()
	b.ReportMetric(float64(p50.Microseconds()), "p50-us")
	b.ReportMetric(float64(p99.Microseconds()), "p99-us")
	b.ReportMetric(float64(p50)/float64(p50Idle), "p50-ratio")
	fmt.Printf("_ping: idle p50 %v p99 %v; with 100 running containers p50 %v p99 %v (p50 ratio %.2f)\n",
		p50Idle, p99Idle, p50, p99, float64(p50)/float64(p50Idle))
}

// BenchmarkIdleRSS starts the real binary, loads the test image, lets it
// settle and reads its resident set. Goal: under 40 MiB.
func BenchmarkIdleRSS(b *testing.B) {
	benchtest.Require(b)
	requireRuntime(b)
	dir := b.TempDir()
	bin := enginetest.EngineBinary(b)
	var rss float64
	for i := 0; i < b.N; i++ {
		addr := testnet.FreeAddr(b)
		cmd := exec.Command(bin, "--listen", "tcp://"+addr, "--root", filepath.Join(dir, "root"), "--runroot", filepath.Join(dir, "run"))
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		te := &testEngine{enginetest.Attach(b, addr)}
		for deadline := time.Now().Add(30 * time.Second); ; {
			if resp, err := http.Get(te.URL + "/_ping"); err == nil {
				resp.Body.Close()
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("engine did not start")
			}
			time.Sleep(50 * time.Millisecond)
		}
		te.loadBusybox()
		te.Must(http.StatusOK, "GET", "/containers/json?all=true", nil)
		time.Sleep(3 * time.Second)
		data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseFloat(f[1], 64)
				rss = kb / 1024
			}
		}
		cmd.Process.Kill()
		cmd.Wait()
		unmountUnder(dir)
	}
	b.ReportMetric(rss, "MiB")
	fmt.Printf("idle engine RSS: %.1f MiB (goal < 40)\n", rss)
}

// BenchmarkStats50Running times GET /libpod/containers/stats?stream=false
// (every running container) with 50 containers running: one request per
// iteration, reported as the median in microseconds. The host lab's
// TestBenchVsPodman holds the same request to 10x Podman's throughput.
func BenchmarkStats50Running(b *testing.B) {
	benchtest.Require(b)
	te := startEngine(b)
	for i := 0; i < 50; i++ {
		id := te.create(benchSpec("sleep", "600"))
		te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	}
	get := func() time.Duration {
		start := time.Now()
		te.Must(http.StatusOK, "GET", "/containers/stats?stream=false", nil)
		return time.Since(start)
	}
	get()
	b.ResetTimer()
	times := make([]time.Duration, 0, b.N)
	for i := 0; i < b.N; i++ {
		times = append(times, get())
	}
	b.StopTimer()
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Microseconds()), "median-us")
}
