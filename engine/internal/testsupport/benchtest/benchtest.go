// Package benchtest holds what the benchmarks comparing Berth with Podman
// 4.3.1 share: hack/bench.sh starts a Podman service on loopback and
// exports BERTH_BENCH=1 and BERTH_BENCH_PODMAN_URL (tcp://127.0.0.1:PORT)
// to them.
package benchtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Require skips the benchmark unless hack/bench.sh (make bench) runs it.
func Require(tb testing.TB) {
	tb.Helper()
	if os.Getenv("BERTH_BENCH") != "1" {
		tb.Skip("set BERTH_BENCH=1 (make bench) to compare with Podman")
	}
}

// PodmanURL skips the benchmark outside make bench and answers the Podman
// service's URL (tcp://127.0.0.1:PORT).
func PodmanURL(tb testing.TB) string {
	tb.Helper()
	Require(tb)
	u := os.Getenv("BERTH_BENCH_PODMAN_URL")
	if u == "" {
		tb.Fatal("BERTH_BENCH_PODMAN_URL is not set (hack/bench.sh sets it)")
	}
	return u
}

// Timed answers how long f took.
func Timed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

// Median is the middle of d (the upper one of an even count).
func Median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// RLimits are the rlimits hack/bench.sh lets containers ask for
// (BERTH_BENCH_RLIMIT_NOFILE and _NPROC, the Podman service's own) as a
// create request's r_limits; nil when neither is set. Podman gives
// containers rlimits above this machine's hard limits unless the request
// carries them.
func RLimits() []map[string]any {
	var rl []map[string]any
	for _, l := range []struct{ env, typ string }{{"BERTH_BENCH_RLIMIT_NOFILE", "nofile"}, {"BERTH_BENCH_RLIMIT_NPROC", "nproc"}} {
		if v, err := strconv.ParseUint(os.Getenv(l.env), 10, 64); err == nil {
			rl = append(rl, map[string]any{"type": l.typ, "hard": v, "soft": v})
		}
	}
	return rl
}

// Spec is a create request both engines of a comparison get: the busybox
// test image running cmd, with fields added and the rlimits of RLimits when
// hack/bench.sh set them.
func Spec(fields map[string]any, cmd ...string) map[string]any {
	spec := map[string]any{"image": "localhost/busybox:latest", "command": cmd}
	for k, v := range fields {
		spec[k] = v
	}
	if rl := RLimits(); rl != nil {
		spec["r_limits"] = rl
	}
	return spec
}

// Throughput runs berth and podman in turns, b.N times each with the
// benchmark's timer running, and reports each one's nanoseconds per
// operation (berth-ns/UNIT, podman-ns/UNIT) and Podman's time over Berth's
// (x-podman-throughput); it answers the two times per operation.
func Throughput(b *testing.B, unit string, berth, podman func()) (berthPer, podmanPer float64) {
	var berthTime, podmanTime time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		berth()
		berthTime += time.Since(start)
		start = time.Now()
		podman()
		podmanTime += time.Since(start)
	}
	b.StopTimer()
	berthPer = float64(berthTime.Nanoseconds()) / float64(b.N)
	podmanPer = float64(podmanTime.Nanoseconds()) / float64(b.N)
	b.ReportMetric(berthPer, "berth-ns/"+unit)
	b.ReportMetric(podmanPer, "podman-ns/"+unit)
	b.ReportMetric(podmanPer/berthPer, "x-podman-throughput")
	return berthPer, podmanPer
}

// Alternate measures berth and podman in turns, rounds pairs for each of
// b.N iterations (n counts the pairs), sleeping pauses[0] after each of
// berth's measurements and pauses[1] after podman's, with the benchmark's
// timer running only meanwhile. Alternating runs see the same machine load;
// the pauses let background work (Podman's "container cleanup" process per
// exit, say) finish before the next measurement.
func Alternate(b *testing.B, rounds int, pauses [2]time.Duration, berth, podman func(n int) time.Duration) (bs, ps []time.Duration) {
	b.Helper()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := 0; j < rounds; j++ {
			n := i*rounds + j
			bs = append(bs, berth(n))
			time.Sleep(pauses[0])
			ps = append(ps, podman(n))
			time.Sleep(pauses[1])
		}
	}
	b.StopTimer()
	return bs, ps
}

// Compare is the usual comparison: one warm-up of each engine (berth and
// podman called with n = -1: first mounts, caches), then Alternate, then
// Report of what was measured.
func Compare(b *testing.B, what, goal, unit string, rounds int, pauses [2]time.Duration, berth, podman func(n int) time.Duration) {
	b.Helper()
	ComparePeer(b, "podman", what, goal, unit, rounds, pauses, berth, podman)
}

// ComparePeer is Compare against another peer than Podman (dockerd, say),
// named so in the metrics and the printed line.
func ComparePeer(b *testing.B, peer, what, goal, unit string, rounds int, pauses [2]time.Duration, berth, other func(n int) time.Duration) {
	b.Helper()
	berth(-1)
	other(-1)
	bs, ps := Alternate(b, rounds, pauses, berth, other)
	ReportPeer(b, peer, what, goal, unit, bs, ps)
}

// Report reports both medians (berth-ms, podman-ms) and berth's as a
// fraction of podman's (ratio), and prints them on one line: "WHAT: berth
// median B, podman median P, ratio R (GOAL) over N UNIT each".
func Report(b *testing.B, what, goal, unit string, bs, ps []time.Duration) {
	b.Helper()
	ReportPeer(b, "podman", what, goal, unit, bs, ps)
}

// ReportPeer is Report with the peer's name in place of podman's.
func ReportPeer(b *testing.B, peer, what, goal, unit string, bs, ps []time.Duration) {
	b.Helper()
	mb, mp, ratio := ReportRatio(b, "berth", peer, bs, ps)
	if goal != "" {
		goal = " (" + goal + ")"
	}
	fmt.Printf("%s: berth median %v, %s median %v, ratio %.3f%s over %d %s each\n", what, mb, peer, mp, ratio, goal, len(bs), unit)
}

// ReportRatio reports the medians of two sets of timings (NUM-ms and
// DEN-ms) and the first over the second (ratio), and answers them.
func ReportRatio(b *testing.B, num, den string, nums, dens []time.Duration) (mn, md time.Duration, ratio float64) {
	b.Helper()
	mn, md = Median(nums), Median(dens)
	ratio = float64(mn) / float64(md)
	b.ReportMetric(float64(mn.Microseconds())/1000, num+"-ms")
	b.ReportMetric(float64(md.Microseconds())/1000, den+"-ms")
	b.ReportMetric(ratio, "ratio")
	return mn, md, ratio
}

// ListThroughput issues GET url from 4 clients for d and answers the
// complete listings per second: answers of 200 holding a JSON array of at
// least want entries.
func ListThroughput(url string, want int, d time.Duration) float64 {
	var n atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{}
			for time.Now().Before(deadline) {
				resp, err := client.Get(url)
				if err != nil {
					return
				}
				var list []json.RawMessage
				json.NewDecoder(resp.Body).Decode(&list)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK && len(list) >= want {
					n.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return float64(n.Load()) / d.Seconds()
}

// CompareRates measures berth's and podman's throughput (requests a
// second, as ListThroughput answers them) in turns, b.N times with the
// benchmark's timer running, and reports the last of each (berth-req/s,
// podman-req/s) and berth's over podman's (ratio), printed on one line:
// "WHAT: berth B req/s, podman P req/s, ratio R (GOAL)". A podman that
// answered nothing complete fails the benchmark.
func CompareRates(b *testing.B, what, goal string, berth, podman func() float64) {
	b.Helper()
	b.ResetTimer()
	var rb, rp float64
	for i := 0; i < b.N; i++ {
		rb, rp = berth(), podman()
	}
	b.StopTimer()
	if rp == 0 {
		b.Fatal("podman answered no complete listing")
	}
	b.ReportMetric(rb, "berth-req/s")
	b.ReportMetric(rp, "podman-req/s")
	b.ReportMetric(rb/rp, "ratio")
	fmt.Printf("%s: berth %.0f req/s, podman %.0f req/s, ratio %.1f (%s)\n", what, rb, rp, rb/rp, goal)
}
