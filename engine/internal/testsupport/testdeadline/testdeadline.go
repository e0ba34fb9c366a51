// Package testdeadline gives a test a deadline of its own. A test still
// running at its deadline ends the test binary at once, naming the test and
// printing every goroutine's stack, instead of hanging until go test's
// package timeout and taking the other tests of the run with it.
package testdeadline

import (
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"testing"
	"time"
)

// Default is the deadline helpers set for one test: generous, since tests
// run slowly on a loaded 2-core machine, but well within the package timeout.
const Default = 4 * time.Minute

var armed sync.Map // testing.TB -> struct{}

// Set gives t a deadline d from now; a second call for the same t is a no-op,
// so harness helpers may call it every time they are used. Benchmarks get
// none: how long they run is up to -benchtime.
func Set(t testing.TB, d time.Duration) {
	t.Helper()
	if _, ok := t.(*testing.B); ok {
		return
	}
	if _, loaded := armed.LoadOrStore(t, struct{}{}); loaded {
		return
	}
	name := t.Name()
	timer := time.AfterFunc(d, func() { expired(name, d) })
	t.Cleanup(func() {
		timer.Stop()
		armed.Delete(t)
	})
}

// expired reports a test that overran its deadline and ends the binary.
func expired(name string, d time.Duration) {
	fmt.Fprintf(os.Stderr, "\n%s is still running after its deadline of %v; all goroutines:\n\n", name, d)
	_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
	fmt.Fprintf(os.Stderr, "\n--- FAIL: %s (deadline of %v exceeded, see the goroutines above)\nFAIL\n", name, d)
	os.Exit(2)
}
