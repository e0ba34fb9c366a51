package enginetest

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containers/storage/pkg/reexec"

	"github.com/berth-project/berth/shared/testnet"
)

// engineBinary is berth-engine as the tests that run it as a process build
// it: once per test binary, removed by Main.
var engineBinary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Main runs a package's tests: a re-executed helper of containers/storage
// runs instead when this process is one, and what the tests shared (the
// engine binary, the Shared engine) is removed afterwards; the run fails
// when the shared engine left something on the host.
func Main(m *testing.M) {
	if reexec.Init() {
		return
	}
	code := m.Run()
	stopShared()
	if sharedLeaked && code == 0 {
		code = 1
	}
	if engineBinary.dir != "" {
		os.RemoveAll(engineBinary.dir)
	}
	os.Exit(code)
}

// EngineBinary builds berth-engine once per test binary (with cgo off and
// the build tags containers/image and storage need, whatever GOFLAGS
// says) and returns its path. A package using it runs its tests through
// Main, which removes the binary. Where BERTH_ENGINE_BIN names a binary it
// is used as it is: the host lab (hack/hostlab.sh) copies a static one
// into its VM, which has no Go toolchain to build one, and `make test`
// (hack/test.sh) builds one for all the engine's test packages.
func EngineBinary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("BERTH_ENGINE_BIN"); bin != "" {
		return bin
	}
	engineBinary.once.Do(func() {
		dir, err := os.MkdirTemp("", "berth-engine-bin-")
		if err != nil {
			engineBinary.err = err
			return
		}
		engineBinary.dir, engineBinary.path = dir, filepath.Join(dir, "berth-engine")
		cmd := exec.Command("go", "build", "-tags", "containers_image_openpgp,exclude_graphdriver_btrfs,exclude_graphdriver_devicemapper",
			"-o", engineBinary.path, "github.com/berth-project/berth/engine/cmd/berth-engine")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			engineBinary.err = fmt.Errorf("build berth-engine: %v\n%s", err, out)
		}
	})
	if engineBinary.err != nil {
		t.Fatal(engineBinary.err)
	}
	return engineBinary.path
}

// Process is the berth-engine binary running as a process of its own, so
// that a test can kill it with SIGKILL and start it again on the same
// state and address.
type Process struct {
	*Engine
	// Args are the engine's flags: listener, state directories, networks
	// and the options' Args.
	Args []string
	// LogPath receives the engine's output, kept across restarts.
	LogPath string
	bin     string
	cmd     *exec.Cmd
	// exited is closed once cmd's process has exited and been reaped.
	exited chan struct{}
}

// StartProcess starts berth-engine (EngineBinary) with its state in a
// directory of the test, on networks unique to the test, under the default
// per-test deadline, and loads the test image. At cleanup an engine still
// running has its objects removed (Engine.RemoveAll), is stopped and has
// what it left on the host checked (HostLeaks); then nothing stays mounted
// below the directory. Options' Image, BeforeStop and
// AfterStop work as for Start.
func StartProcess(t testing.TB, o Options) *Process {
	t.Helper()
	// The binary is built before prepare arms the test's deadline: on a
	// busy machine the build alone can take minutes.
	bin := EngineBinary(t)
	e := prepare(t, o)
	e.Addr = testnet.FreeAddr(t)
	e.URL = libpodURL(e.Addr)
	p := &Process{Engine: e, LogPath: filepath.Join(e.Dir, "engine.log"), bin: bin}
	p.Args = append(append([]string{"--listen", "tcp://" + p.Addr, "--root", p.Root, "--runroot", p.RunRoot}, NetworkFlags(e.Nets)...), o.Args...)
	p.Start()
	t.Cleanup(func() {
		// Where nothing else is kept (the host lab's VM), the failed
		// test's output is all there is to read.
		if t.Failed() {
			t.Logf("engine log:\n%s", p.Log())
		}
	})
	t.Cleanup(func() {
		if p.Running() {
			pods, ctrs := p.objectIDs()
			p.RemoveAll()
			if o.BeforeStop != nil {
				o.BeforeStop(p.Engine)
			}
			p.Stop()
			p.checkHost(pods, ctrs)
		}
		UnmountUnder(p.Dir, 3)
		if o.AfterStop != nil {
			o.AfterStop(p.Engine)
		}
	})
	p.loadImage(o)
	return p
}

// startTimeout bounds how long Start waits for _ping (the wait ends as
// soon as it answers): a minute on a machine, under a test's 4-minute
// deadline, so that a start that hangs fails with the engine's goroutines;
// three in the host lab's emulated VM (BERTH_HOSTLAB=1), where an engine
// takes far longer.
func startTimeout() time.Duration {
	if os.Getenv("BERTH_HOSTLAB") == "1" {
		return 3 * time.Minute
	}
	return time.Minute
}

// Start starts the engine and waits until it answers _ping.
func (p *Process) Start() {
	p.T.Helper()
	log, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.T.Fatal(err)
	}
	defer log.Close()
	p.cmd = exec.Command(p.bin, p.Args...)
	p.cmd.Stdout, p.cmd.Stderr = log, log
	if err := p.cmd.Start(); err != nil {
		p.T.Fatal(err)
	}
	cmd, exited := p.cmd, make(chan struct{})
	p.exited = exited
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	// The listener is open before the engine is ready: a probe that hangs
	// is cut short, so that the wait ends at its deadline with the log.
	probe := &http.Client{Timeout: 5 * time.Second}
	for deadline := time.Now().Add(startTimeout()); ; time.Sleep(50 * time.Millisecond) {
		select {
		case <-exited:
			// Another process on the address could answer the probe:
			// an engine that exited (it could not listen) is a failure.
			p.T.Fatalf("engine exited before it answered _ping (%v); its log:\n%s%s", cmd.ProcessState, p.Log(), holderOf(p.Addr))
		default:
		}
		resp, err := probe.Get("http://" + p.Addr + "/libpod/_ping")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			// SIGQUIT makes the Go runtime write every goroutine's stack
			// to the log: where the start hangs.
			p.cmd.Process.Signal(syscall.SIGQUIT)
			time.Sleep(2 * time.Second)
			p.T.Fatalf("engine did not answer _ping within %v (%v); its log, with its goroutines:\n%s", startTimeout(), err, p.Log())
		}
	}
}

// Kill9 kills the engine with SIGKILL and reaps it.
func (p *Process) Kill9() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// Stop ends the engine with SIGTERM, or SIGKILL after 30 seconds.
func (p *Process) Stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
	}
}

// ExitState is how the engine's last run ended; nil while it runs.
func (p *Process) ExitState() *os.ProcessState {
	if p.Running() {
		return nil
	}
	return p.cmd.ProcessState
}

// Running tells whether the engine's process is running (started and not
// yet reaped).
func (p *Process) Running() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Log returns what the engine wrote so far.
func (p *Process) Log() string {
	data, _ := os.ReadFile(p.LogPath)
	return string(data)
}

// holderOf names what listens on addr (ss -ltnp), for an engine that could
// not listen there: which process held its address.
func holderOf(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	out, _ := exec.Command("ss", "-Hltnup", "sport = :"+port).CombinedOutput()
	return "\nlistening on port " + port + " now:\n" + string(out)
}
