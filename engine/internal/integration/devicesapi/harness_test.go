// Package devicesapi tests, end to end, what containers get besides an
// image: CDI devices from specs the tests write, a host directory as root
// filesystem (--rootfs), device cgroup rules and supplementary groups. An
// engine serves on a loopback listener, runs real runc containers, and the
// podman 4.3.1 client drives it.
package devicesapi

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/engine"
	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

// testEngine talks to an engine serving on a loopback listener.
type testEngine struct {
	*enginetest.Engine
	cdiDir string // the engine's extra CDI spec directory
}

// startEngine serves an engine that reads CDI specs from a directory of
// the test's (besides /etc/cdi and /var/run/cdi), with the busybox image
// loaded; its containers default to a private network namespace.
func startEngine(t testing.TB) *testEngine {
	t.Helper()
	te := &testEngine{}
	te.Engine = enginetest.Start(t, enginetest.Options{What: "device tests", Needs: []string{"podman"},
		Config: func(e *enginetest.Engine, c *engine.Config) {
			te.cdiDir = filepath.Join(e.Dir, "cdi")
			if err := os.Mkdir(te.cdiDir, 0o755); err != nil {
				t.Fatal(err)
			}
			c.CDISpecDirs = []string{te.cdiDir}
		}})
	return te
}

// podman runs the podman 4.3.1 client against the engine.
func (te *testEngine) podman(args ...string) (string, error) {
	te.T.Helper()
	cmd := te.PodmanCommand(args...)
	cmd.Dir = te.Dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (te *testEngine) mustPodman(args ...string) string {
	te.T.Helper()
	out, err := te.podman(args...)
	if err != nil {
		te.T.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// create posts spec to the libpod create route and returns the status,
// the message of a refusal and the whole body.
func (te *testEngine) create(spec map[string]any) (status int, message string, body []byte) {
	te.T.Helper()
	status, body = te.Do("POST", "/containers/create", spec)
	var msg struct{ Message string }
	json.Unmarshal(body, &msg)
	return status, msg.Message, body
}

// writeSpec writes a CDI spec file into the engine's spec directory.
func (te *testEngine) writeSpec(name, content string) {
	te.T.Helper()
	if err := os.WriteFile(filepath.Join(te.cdiDir, name), []byte(content), 0o644); err != nil {
		te.T.Fatal(err)
	}
}
