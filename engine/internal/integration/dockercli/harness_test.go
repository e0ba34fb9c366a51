package dockercli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/engine"
	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/testimage"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

// commandTimeout bounds one client command.
const commandTimeout = 30 * time.Second

// testEngine is an in-process engine and the clients pointed at it.
type testEngine struct {
	*enginetest.Engine
	env []string
}

// startEngine serves an engine (bridge networks unique to the test), loads
// localhost/busybox:latest with docker load and returns it; the docker CLI
// is required.
func startEngine(t testing.TB) *testEngine {
	t.Helper()
	return startEngineWith(t, nil)
}

// startEngineWith is startEngine with adjust changing the engine's
// configuration before it starts (nil: none).
func startEngineWith(t testing.TB, adjust func(*enginetest.Engine, *engine.Config)) *testEngine {
	t.Helper()
	return dockerClient(t, enginetest.Start(t, enginetest.Options{What: "docker CLI tests", Bridged: true, NoImage: true, Needs: []string{"docker"}, Config: adjust}))
}

// dockerClient points the docker CLI at e (a configuration of its own,
// the classic builder) and loads localhost/busybox:latest with docker load.
func dockerClient(t testing.TB, e *enginetest.Engine) *testEngine {
	t.Helper()
	te := &testEngine{Engine: e}
	config := filepath.Join(te.Dir, "docker-config")
	if err := os.MkdirAll(config, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(config, "config.json"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	te.env = append(os.Environ(),
		"DOCKER_HOST=tcp://"+te.Addr, "DOCKER_CONFIG="+config, "DOCKER_BUILDKIT=0", "DOCKER_CLI_HINTS=false",
		"CONTAINERS_CONF=/dev/null", "XDG_CONFIG_HOME="+config)
	var buf bytes.Buffer
	if err := testimage.DockerArchive(&buf, testimage.Busybox("localhost/busybox:latest", "sh")); err != nil {
		t.Fatal(err)
	}
	te.runIn(&buf, "docker", "load")
	return te
}

// run runs a client command (docker or podman --remote) and fails the test
// unless it succeeds; it returns the standard output.
func (te *testEngine) run(name string, args ...string) string {
	te.T.Helper()
	return te.runIn(nil, name, args...)
}

func (te *testEngine) runIn(stdin *bytes.Buffer, name string, args ...string) string {
	te.T.Helper()
	out, errOut, err := te.exec(stdin, name, args...)
	if err != nil {
		te.T.Fatalf("%s %s: %v\nstdout: %s\nstderr: %s", name, strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// fails runs a command that must fail and returns its standard error.
func (te *testEngine) fails(name string, args ...string) string {
	te.T.Helper()
	out, errOut, err := te.exec(nil, name, args...)
	if err == nil {
		te.T.Fatalf("%s %s succeeded, want a failure\nstdout: %s", name, strings.Join(args, " "), out)
	}
	return errOut
}

func (te *testEngine) exec(stdin *bytes.Buffer, name string, args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	if name == "podman" {
		args = append([]string{"--remote", "--url", "tcp://" + te.Addr}, args...)
	}
	if p := os.Getenv("BERTH_DOCKER_CLI"); name == "docker" && p != "" {
		name = p // a current docker CLI (hack/docker-cli.sh) in place of the machine's
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = te.env
	cmd.Dir = te.Dir
	cmd.WaitDelay = 2 * time.Second
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %v", commandTimeout)
	}
	return out.String(), errOut.String(), err
}

// contains fails unless out holds want.
func contains(t *testing.T, what, out, want string) {
	t.Helper()
	if !strings.Contains(out, want) {
		t.Fatalf("%s: output lacks %q:\n%s", what, want, out)
	}
}
