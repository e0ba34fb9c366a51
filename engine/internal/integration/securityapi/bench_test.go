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
	var with, without []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := 0; j < rounds; j++ {
			with = append(with, runCycle(te, nil))
			time.Sleep(100 * time.Millisecond)
			without = append(without, runCycle(te, unconfined))
			time.Sleep(100 * time.Millisecond)
		}
	}
	b.StopTimer()
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
	var def, withNS []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := 0; j < rounds; j++ {
			def = append(def, runCycle(te, nil))
			time.Sleep(100 * time.Millisecond)
			withNS = append(withNS, runCycle(te, auto))
			time.Sleep(100 * time.Millisecond)
		}
	}
	b.StopTimer()
	md, mu := benchtest.Median(def), benchtest.Median(withNS)
	ratio := float64(mu) / float64(md)
	b.ReportMetric(float64(md.Microseconds())/1000, "default-ms")
	b.ReportMetric(float64(mu.Microseconds())/1000, "userns-auto-ms")
	b.ReportMetric(ratio, "ratio")
	fmt.Printf("create+start+wait+rm: default median %v, --userns=auto median %v, ratio %.2f (goal <= 2) over %d runs each\n", md, mu, ratio, len(def))
}
