package containers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/need"
)

// podmanRemote runs podman --remote against te and returns stdout and the
// error. Without podman the test skips (fails under BERTH_TEST_STRICT=1).
func podmanRemote(t *testing.T, te *testEngine) func(args ...string) (string, error) {
	t.Helper()
	bin := need.Program(t, "podman client tests", "podman")
	base := "tcp://" + strings.TrimPrefix(strings.TrimSuffix(te.URL, "/v4.3.1/libpod"), "http://")
	xdg := t.TempDir()
	return func(args ...string) (string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"--remote", "--url", base}, args...)...)
		cmd.Env = append(os.Environ(), "CONTAINERS_CONF=/dev/null", "XDG_CONFIG_HOME="+xdg)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if err != nil {
			err = &podmanError{args: args, err: err, stderr: stderr.String()}
		}
		return stdout.String(), err
	}
}

type podmanError struct {
	args   []string
	err    error
	stderr string
}

// mustSucceed wraps a podman client (podmanRemote's) into one whose
// failure fails the test.
func mustSucceed(t *testing.T, podman func(args ...string) (string, error)) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		out, err := podman(args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
}

func (e *podmanError) Error() string {
	return "podman " + strings.Join(e.args, " ") + ": " + e.err.Error() + ": " + e.stderr
}

func TestPodmanRemoteVolumes(t *testing.T) {
	te := startEngine(t)
	podman := podmanRemote(t, te)
	must := mustSucceed(t, podman)
	lines := func(s string) []string { return strings.Fields(s) }

	if out := must("volume", "create", "--label", "app=web", "myvol"); strings.TrimSpace(out) != "myvol" {
		t.Fatalf("volume create: %q", out)
	}
	if _, err := podman("volume", "create", "myvol"); err == nil {
		t.Fatal("creating a taken name succeeded")
	}
	var insp []struct {
		Name, Driver, Mountpoint, Scope string
		Labels                          map[string]string
	}
	if err := json.Unmarshal([]byte(must("volume", "inspect", "myvol")), &insp); err != nil || len(insp) != 1 ||
		insp[0].Driver != "local" || insp[0].Scope != "local" || insp[0].Labels["app"] != "web" {
		t.Fatalf("volume inspect: %+v %v", insp, err)
	}
	must("volume", "exists", "myvol")
	if _, err := podman("volume", "exists", "nope"); err == nil {
		t.Fatal("volume exists nope succeeded")
	}
	if got := lines(must("volume", "ls", "-q", "--filter", "label=app=web")); len(got) != 1 || got[0] != "myvol" {
		t.Fatalf("volume ls --filter: %v", got)
	}

	if out := must("run", "--name", "writer", "-v", "myvol:/data", "busybox", "sh", "-c", "echo persisted > /data/f"); out != "" {
		t.Fatalf("writer printed %q", out)
	}
	if out := must("run", "--rm", "-v", "myvol:/data", "busybox", "cat", "/data/f"); strings.TrimSpace(out) != "persisted" {
		t.Fatalf("reader: %q", out)
	}
	if out := must("run", "--rm", "--volumes-from", "writer:ro", "busybox", "cat", "/data/f"); strings.TrimSpace(out) != "persisted" {
		t.Fatalf("--volumes-from: %q", out)
	}
	if _, err := podman("volume", "rm", "myvol"); err == nil {
		t.Fatal("removing a volume in use succeeded")
	}

	must("run", "--name", "anon", "-v", "/scratch", "busybox", "true")
	if got := lines(must("volume", "ls", "-q")); len(got) != 2 {
		t.Fatalf("volumes with an anonymous one: %v", got)
	}
	must("rm", "-v", "anon")
	if got := lines(must("volume", "ls", "-q")); len(got) != 1 || got[0] != "myvol" {
		t.Fatalf("volumes after rm -v: %v", got)
	}
	must("run", "--rm", "-v", "/scratch", "busybox", "true")
	if got := lines(must("volume", "ls", "-q")); len(got) != 1 {
		t.Fatalf("volumes after run --rm: %v", got)
	}

	must("volume", "rm", "-f", "myvol")
	if _, err := podman("container", "exists", "writer"); err == nil {
		t.Fatal("volume rm -f left the container that used the volume")
	}
	must("volume", "create", "p1")
	must("volume", "create", "p2")
	if got := lines(must("volume", "prune", "-f")); len(got) != 2 {
		t.Fatalf("volume prune: %v", got)
	}
	if got := lines(must("volume", "ls", "-q")); len(got) != 0 {
		t.Fatalf("volumes after prune: %v", got)
	}
	evs := strings.Split(strings.TrimSpace(must("events", "--stream=false", "--filter", "volume=p1", "--format", "{{.Type}} {{.Status}} {{.Name}}")), "\n")
	if len(evs) != 2 || evs[0] != "volume create p1" || evs[1] != "volume remove p1" {
		t.Fatalf("volume events: %q", evs)
	}
}
