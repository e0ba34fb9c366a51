package enginetest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// RequireCRIU returns a CRIU binary that passes "criu check": the one
// BERTH_ENGINE_CRIU names (hack/test.sh sets it from hack/criu.sh, which
// builds CRIU where the machine's own cannot run), else criu in PATH. It
// skips without one (fails under BERTH_TEST_STRICT=1). Engines get it as
// engine.Config.CRIU or through the inherited BERTH_ENGINE_CRIU.
func RequireCRIU(t testing.TB) string {
	t.Helper()
	path, err := FindCRIU()
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

// FindCRIU is RequireCRIU's search: the working CRIU, or why there is none.
func FindCRIU() (string, error) {
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
