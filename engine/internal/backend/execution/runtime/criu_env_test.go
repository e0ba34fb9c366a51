package runtime

import (
	"os"
	"slices"
	"testing"
)

// TestProbeBreakpoints runs the probe for real: it must come to an answer
// (a traced true(1) either stops at its entry point or runs to its end),
// and criuEnv must follow it.
func TestProbeBreakpoints(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the probe traces a process: run as root")
	}
	ok, err := probeBreakpoints()
	if err != nil {
		t.Fatalf("probeBreakpoints: %v", err)
	}
	t.Logf("hardware breakpoints stop a traced process here: %v", ok)
	if got := slices.Contains(criuEnv(), criuNoBreakpoints); got == ok {
		t.Errorf("criuEnv() = %q with breakpoints working = %v", criuEnv(), ok)
	}
}
