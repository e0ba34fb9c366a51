package testdeadline

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestExpiredEndsTheBinary runs a test that overruns its deadline in a child
// go test binary: it must fail quickly, naming the test and showing stacks.
func TestExpiredEndsTheBinary(t *testing.T) {
	if os.Getenv("TESTDEADLINE_CHILD") == "1" {
		Set(t, 200*time.Millisecond)
		Set(t, time.Hour) // no-op: the first deadline stays
		time.Sleep(time.Minute)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestExpiredEndsTheBinary$")
	cmd.Env = append(os.Environ(), "TESTDEADLINE_CHILD=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	if err == nil {
		t.Fatalf("child passed:\n%s", out.String())
	}
	if el := time.Since(start); el > 30*time.Second {
		t.Fatalf("child took %v", el)
	}
	for _, want := range []string{"--- FAIL: TestExpiredEndsTheBinary (deadline of 200ms exceeded", "goroutine ", "time.Sleep"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("child output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestFinishedInTime(t *testing.T) {
	t.Run("sub", func(t *testing.T) { Set(t, 100*time.Millisecond) })
	time.Sleep(300 * time.Millisecond) // the subtest's timer was stopped at its end
}
