package compatapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

// startEngine starts an in-process engine with its own state and the
// busybox image; everything it made is removed when the test ends.
func startEngine(t *testing.T) *enginetest.Engine {
	t.Helper()
	return enginetest.Start(t, enginetest.Options{What: "libpod compatibility tests"})
}

// errorBody is the engine's error answer.
type errorBody struct {
	Cause    string `json:"cause"`
	Message  string `json:"message"`
	Response int    `json:"response"`
}

// decodeError reads an error answer, failing the test when it is not one.
func decodeError(t *testing.T, body []byte) errorBody {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal(body, &e); err != nil || e.Cause == "" || e.Message == "" {
		t.Fatalf("not an error body (%v): %s", err, body)
	}
	return e
}

// podmanFails runs the podman client, which must fail with exit status
// code and print want.
func podmanFails(t *testing.T, e *enginetest.Engine, code int, want string, args ...string) {
	t.Helper()
	enginetest.Require(t, "podman client tests", "podman")
	out, err := e.PodmanCommand(args...).CombinedOutput()
	status := 0
	if err != nil {
		status = -1
		if ee, ok := err.(interface{ ExitCode() int }); ok {
			status = ee.ExitCode()
		}
	}
	if status != code || !strings.Contains(string(out), want) {
		t.Fatalf("podman %s: exit %d, output %q; want exit %d and %q", strings.Join(args, " "), status, out, code, want)
	}
}
