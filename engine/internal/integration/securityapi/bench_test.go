package securityapi

import (
	"fmt"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/benchtest"
)

// runCycle creates, starts, waits for and removes one `true` container
// (netns none) with the extra members of spec, through the API.
func runCycle(te *testEngine, extra map[string]any) time.Duration {
	spec := map[string]any{"image": "localhost/busybox:latest", "command": []string{"true"}, "netns": map[string]string{"nsmode": "none"}}
	for k, v := range extra {
		spec[k] = v
	}
	return te.RunOnce(spec)
}

// BenchmarkSeccompOverhead: the create+start+wait+rm cycle with the default
// seccomp profile and with seccomp=unconfined, alternated on one engine so
// both see the same load. Goal: the filter adds at most 5 ms (median).
func BenchmarkSeccompOverhead(b *testing.B) {
	benchtest.Require(b)
	te := startEngine(b)
	te.Load(busybox)
	unconfined := map[string]any{"seccomp_profile_path": "unconfined"}
	runCycle(te, nil)
	runCycle(te, unconfined)
	const rounds = 25
	with, without := benchtest.Alternate(b, rounds, [2]time.Duration{100 * time.Millisecond, 100 * time.Millisecond},
		func(int) time.Duration { return runCycle(te, nil) }, func(int) time.Duration { return runCycle(te, unconfined) })
	mw, mo := benchtest.Median(with), benchtest.Median(without)
	b.ReportMetric(float64(mw.Microseconds())/1000, "seccomp-ms")
	b.ReportMetric(float64(mo.Microseconds())/1000, "unconfined-ms")
	b.ReportMetric(float64((mw-mo).Microseconds())/1000, "added-ms")
	fmt.Printf("create+start+wait+rm: default seccomp median %v, unconfined median %v, added %v (goal <= 5ms) over %d runs each\n", mw, mo, mw-mo, len(with))
}

// BenchmarkUserNSOverhead: the same cycle with --userns=auto (a range
// allocated, the root filesystem mounted for the mapped IDs) against the
// default, alternated on one engine. Goal: at most 2x the default's median.
func BenchmarkUserNSOverhead(b *testing.B) {
	benchtest.Require(b)
	te := startEngine(b)
	te.Load(busybox)
	auto := map[string]any{"userns": map[string]string{"nsmode": "auto"}}
	runCycle(te, nil)
	runCycle(te, auto)
	const rounds = 25
	def, withNS := benchtest.Alternate(b, rounds, [2]time.Duration{100 * time.Millisecond, 100 * time.Millisecond},
		func(int) time.Duration { return runCycle(te, nil) }, func(int) time.Duration { return runCycle(te, auto) })
	mu, md, ratio := benchtest.ReportRatio(b, "userns-auto", "default", withNS, def)
	fmt.Printf("create+start+wait+rm: default median %v, --userns=auto median %v, ratio %.2f (goal <= 2) over %d runs each\n", md, mu, ratio, len(def))
}
