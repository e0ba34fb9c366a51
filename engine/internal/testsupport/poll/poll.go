// Package poll holds the tests' waiting for what happens a moment later
// (a container's exit recorded, a port answering, a cgroup removed):
// polling a condition until it holds or a time limit passes. It imports
// nothing of the engine, so that every test, unit or integration, can
// use it.
package poll

import (
	"testing"
	"time"
)

// Interval is how long Within and Until sleep between two checks.
const Interval = 50 * time.Millisecond

// Within checks cond every Interval until it holds (true) or d has passed
// (false); cond runs at least once, and once more at the limit.
func Within(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(Interval) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// Until fails t unless cond holds within d (see Within); what names the
// awaited event in the failure.
func Until(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Within(d, cond) {
		t.Fatalf("%s: not within %v", what, d)
	}
}
