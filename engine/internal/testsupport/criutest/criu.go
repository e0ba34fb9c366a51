// Package criutest finds the CRIU the checkpoint tests use. It imports
// nothing of the engine, so that the runtime's own tests (below the engine
// enginetest starts) can use it too.
package criutest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// Require returns a CRIU binary that passes "criu check": the one
// BERTH_ENGINE_CRIU names (hack/test.sh sets it from hack/criu.sh, which
// builds CRIU where the machine's own cannot run), else criu in PATH. It
// skips without one (fails under BERTH_TEST_STRICT=1).
func Require(t testing.TB) string {
	t.Helper()
	path, err := Find()
	if err == nil {
		return path
	}
	why := err.Error()
	if os.Getenv("BERTH_TEST_STRICT") == "1" {
		t.Fatalf("checkpoint tests need a working CRIU (BERTH_TEST_STRICT=1; hack/criu.sh builds one, BERTH_ENGINE_CRIU names it): %s", why)
	}
	t.Skipf("checkpoint tests need a working CRIU (hack/criu.sh builds one; set BERTH_ENGINE_CRIU): %s", why)
	return ""
}

// Find is Require's search: the working CRIU, or why there is none.
func Find() (string, error) {
	path := os.Getenv("BERTH_ENGINE_CRIU")
	if path == "" {
		path, _ = exec.LookPath("criu")
	}
	if path == "" {
		return "", errors.New("no criu in PATH")
	}
	if out, err := exec.Command(path, "check").CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s check: %v: %s", path, err, out)
	}
	return path, nil
}
