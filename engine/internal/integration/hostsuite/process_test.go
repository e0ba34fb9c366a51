package hostsuite

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
	"github.com/berth-project/berth/shared/testnet"
)

// engineProcess is a berth-engine binary run as its own process on a
// loopback TCP port (what a systemd service or podman --url reaches).
type engineProcess struct {
	*lab
	addr string
	args []string
	bin  string
	cmd  *exec.Cmd
	log  *os.File
}

// startEngineProcess starts the engine binary with its own root and
// networks and loads the busybox image; the test's end stops it and
// removes what it made. extra are further engine flags.
func startEngineProcess(t *testing.T, extra ...string) *engineProcess {
	t.Helper()
	testdeadline.Set(t, testdeadline.Default)
	enginetest.RequireRuntime(t, "host suite tests")
	dir := t.TempDir()
	p := &engineProcess{addr: "127.0.0.1:" + strconv.Itoa(testnet.FreePort(t)), bin: engineBinary(t)}
	root, runRoot := filepath.Join(dir, "root"), filepath.Join(dir, "run")
	nets := enginetest.UniqueNetworks(t)
	nets.DefaultMode = "private"
	p.args = append(append([]string{"--listen", "tcp://" + p.addr, "--root", root, "--runroot", runRoot}, enginetest.NetworkFlags(nets)...), extra...)
	// The engine's log is shown only when the test fails.
	logPath := filepath.Join(dir, "engine.log")
	var err error
	if p.log, err = os.Create(logPath); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.log.Close()
		if t.Failed() {
			data, _ := os.ReadFile(logPath)
			t.Logf("engine log:\n%s", data)
		}
	})
	p.start(t)
	p.lab = &lab{t: t, url: "http://" + p.addr + "/v4.3.1/libpod", root: root, runRoot: runRoot, client: &http.Client{}}
	t.Cleanup(func() {
		p.removeAll()
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Signal(syscall.SIGTERM)
			p.cmd.Wait()
		}
		enginetest.UnmountUnder(dir, 3)
	})
	p.loadBusybox()
	return p
}

// start starts the engine process and waits for its _ping.
func (p *engineProcess) start(t *testing.T) {
	t.Helper()
	p.cmd = exec.Command(p.bin, p.args...)
	p.cmd.Stderr = p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "the engine answering _ping", func() bool {
		resp, err := http.Get("http://" + p.addr + "/libpod/_ping")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
}

// kill kills the engine process with SIGKILL.
func (p *engineProcess) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
}

// requirePodman skips (fails under BERTH_TEST_STRICT=1) without podman.
func requirePodman(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("podman"); err != nil {
		if os.Getenv("BERTH_TEST_STRICT") == "1" {
			t.Fatal("podman is not installed (BERTH_TEST_STRICT=1)")
		}
		t.Skip("podman is not installed")
	}
}

// podmanRemote runs podman 4.3.1's remote client against the engine at
// l: stdout and stderr apart.
func (l *lab) podmanRemote(args ...string) (stdout, stderr string, err error) {
	url := "tcp://" + strings.TrimPrefix(strings.TrimSuffix(l.url, "/v4.3.1/libpod"), "http://")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "podman", append([]string{"--remote", "--url", url}, args...)...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), err
}

// mustPodman is podmanRemote that fails the test on an error; it answers
// stdout.
func (l *lab) mustPodman(args ...string) string {
	l.t.Helper()
	out, errOut, err := l.podmanRemote(args...)
	if err != nil {
		l.t.Fatalf("podman %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}
