// Package benchtest holds what the benchmarks comparing Berth with Podman
// 4.3.1 share: hack/bench.sh starts a Podman service on loopback and
// exports BERTH_BENCH=1 and BERTH_BENCH_PODMAN_URL (tcp://127.0.0.1:PORT)
// to them.
package benchtest

import (
	"os"
	"slices"
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

// Median is the middle of d (the upper one of an even count).
func Median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
