package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/testsupport/need"
	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
)

const busybox = "/bin/busybox"

func requireTools(t *testing.T) {
	t.Helper()
	need.All(t, "runtime tests", "root", "runc", "conmon", busybox)
}

// bundle writes a minimal busybox bundle running args.
// newRuntime is a runtime on a run root of the test's own, where runc and
// conmon are installed (the test is skipped elsewhere).
func newRuntime(t *testing.T) *Runtime {
	t.Helper()
	requireTools(t)
	r, err := New(Options{RunRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func bundle(t *testing.T, id string, terminal bool, args ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), id)
	rootfs := filepath.Join(dir, "rootfs")
	for _, d := range []string{"bin", "proc", "dev", "sys", "tmp"} {
		os.MkdirAll(filepath.Join(rootfs, d), 0o755)
	}
	data, err := os.ReadFile(busybox)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(rootfs, "bin/busybox"), data, 0o755)
	for _, a := range []string{"sh", "echo", "sleep", "cat", "tty"} {
		os.Symlink("busybox", filepath.Join(rootfs, "bin", a))
	}
	spec := testSpec(id, rootfs, &specs.Process{Terminal: terminal, Args: args, Cwd: "/", Env: []string{"PATH=/bin"}})
	spec.Mounts = append(spec.Mounts, specs.Mount{Destination: "/dev/pts", Type: "devpts", Source: "devpts",
		Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}})
	writeConfig(t, dir, spec)
	return dir
}

// mustCreate creates the container of bundle dir as id, its output logged to
// dir/ctr.log; a failure ends the test.
func mustCreate(t *testing.T, r *Runtime, id, dir string) {
	t.Helper()
	if _, err := r.Create(context.Background(), CreateOptions{ID: id, Name: "t", Bundle: dir, LogPath: filepath.Join(dir, "ctr.log")}); err != nil {
		t.Fatal(err)
	}
}

// newContainer creates a container of id that runs args, in a bundle of its
// own whose directory it returns; the container is deleted, by force, when
// the test ends.
func newContainer(t *testing.T, r *Runtime, id string, args ...string) string {
	t.Helper()
	dir := bundle(t, id, false, args...)
	t.Cleanup(func() { r.Delete(context.Background(), id, true) })
	mustCreate(t, r, id, dir)
	return dir
}

// mustStart starts the created container id; a failure ends the test.
func mustStart(t *testing.T, r *Runtime, id string) {
	t.Helper()
	if err := r.Start(context.Background(), id); err != nil {
		t.Fatal(err)
	}
}

// testSpec is the spec of the tests' containers: process in rootfs, with
// /proc and /dev mounted, in new pid, mount, ipc, uts and network
// namespaces, under the test cgroup (see cleanupTestCgroups).
func testSpec(id, rootfs string, process *specs.Process) specs.Spec {
	return specs.Spec{
		Version: specs.Version,
		Process: process,
		Root:    &specs.Root{Path: rootfs},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "mode=755"}},
		},
		Linux: &specs.Linux{
			CgroupsPath: "/berth-runtime-test/" + id,
			Namespaces:  []specs.LinuxNamespace{{Type: "pid"}, {Type: "mount"}, {Type: "ipc"}, {Type: "uts"}, {Type: "network"}},
		},
	}
}

// writeConfig writes spec as the bundle's config.json.
func writeConfig(t *testing.T, dir string, spec specs.Spec) {
	t.Helper()
	cfg, _ := json.Marshal(spec)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
}

// watchExits reports the IDs of the containers of r that exit, until the
// test ends.
func watchExits(t *testing.T, r *Runtime) <-chan string {
	t.Helper()
	exits := make(chan string, 16)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := r.WatchExits(ctx, func(id string) { exits <- id }); err != nil {
		t.Fatal(err)
	}
	return exits
}

func waitExit(t *testing.T, r *Runtime, id string) int32 {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if code, _, ok, err := r.ReadExit(id); err == nil && ok {
			return code
		}
	}
	t.Fatalf("container %s: no exit file", id)
	return -1
}

// waitWatched waits for the exit watch to report container id.
func waitWatched(t *testing.T, exits <-chan string, id string) {
	t.Helper()
	select {
	case got := <-exits:
		if got != id {
			t.Fatalf("exit watch reported %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("exit watch reported nothing")
	}
}

// deleteExited deletes an exited container and checks the runtime no
// longer knows it.
func deleteExited(t *testing.T, r *Runtime, id string) {
	t.Helper()
	if err := r.DeleteExited(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if _, err := r.State(context.Background(), id); !errors.Is(err, ErrNotExist) {
		t.Fatalf("state after delete: %v", err)
	}
}

func TestCreateStartExecKillDelete(t *testing.T) {
	r := newRuntime(t)
	ctx := context.Background()
	exits := watchExits(t, r)

	id := "berth-runtime-test-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	dir := bundle(t, id, false, "sh", "-c", "echo up; while true; do sleep 0.05; done")
	defer r.Delete(ctx, id, true)
	created, err := r.Create(ctx, CreateOptions{ID: id, Name: "t", Bundle: dir, LogPath: filepath.Join(dir, "ctr.log")})
	if err != nil {
		t.Fatal(err)
	}
	if created.PID <= 0 || created.ConmonPID <= 0 {
		t.Fatalf("created %+v", created)
	}
	if st, err := r.State(ctx, id); err != nil || st.Status != "created" {
		t.Fatalf("state after create: %+v %v", st, err)
	}
	mustStart(t, r, id)
	if st, err := r.State(ctx, id); err != nil || st.Status != "running" || st.Pid != created.PID {
		t.Fatalf("state after start: %+v %v", st, err)
	}

	c := &core.Container{ID: id, Bundle: dir}
	var out, errOut bytes.Buffer
	p, err := r.Exec(ctx, c, core.ExecRequest{Process: specs.Process{Args: []string{"sh", "-c", "cat; echo oops >&2; exit 3"}, Cwd: "/", Env: []string{"PATH=/bin"}},
		Stdin: strings.NewReader("piped\n"), Stdout: &out, Stderr: &errOut})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(); err != nil || code != 3 || out.String() != "piped\n" || errOut.String() != "oops\n" {
		t.Fatalf("exec: code %d err %v stdout %q stderr %q", code, err, out.String(), errOut.String())
	}
	// A terminal exec sees a tty and merges its output.
	pr, pw := io.Pipe()
	var ttyOut bytes.Buffer
	done := make(chan struct{})
	go func() { io.Copy(&ttyOut, pr); close(done) }()
	p, err = r.Exec(ctx, c, core.ExecRequest{Process: specs.Process{Terminal: true, Args: []string{"sh", "-c", "tty; echo err >&2"}, Cwd: "/", Env: []string{"PATH=/bin"}}, Stdout: pw})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(); err != nil || code != 0 {
		t.Fatalf("tty exec: %d %v", code, err)
	}
	pw.Close()
	<-done
	if !strings.Contains(ttyOut.String(), "/dev/pts/") || !strings.Contains(ttyOut.String(), "err") {
		t.Fatalf("tty exec output %q", ttyOut.String())
	}
	// A missing command fails at Exec or at Wait, depending on when runc reports it.
	if p, err := r.Exec(ctx, c, core.ExecRequest{Process: specs.Process{Args: []string{"/nope"}, Cwd: "/"}}); err == nil {
		if code, err := p.Wait(); err == nil && code == 0 {
			t.Fatal("exec of a missing command succeeded")
		}
	}

	// The in-process kill signals the container's own init only: a state
	// naming its PID with another start time (a reused PID) is refused.
	reused := id + "-reused"
	if err := os.MkdirAll(filepath.Join(r.stateRoot, reused), 0o700); err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(filepath.Join(r.stateRoot, reused))
	os.WriteFile(filepath.Join(r.stateRoot, reused, "state.json"), []byte(fmt.Sprintf(`{"init_process_pid":%d,"init_process_start":1}`, created.PID)), 0o600)
	if err := r.signalInit(reused, syscall.SIGKILL); err == nil {
		t.Fatal("signalled a PID whose start time is not the container's")
	}
	if st, err := r.State(ctx, id); err != nil || st.Status != "running" {
		t.Fatalf("state after a refused signal: %+v %v", st, err)
	}
	if err := r.signalInit(id, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, r, id); code != 137 {
		t.Fatalf("exit code after SIGKILL: %d", code)
	}
	waitWatched(t, exits, id)
	deleteExited(t, r, id)
	if cg, _ := filepath.Glob("/sys/fs/cgroup/*/berth-runtime-test/" + id); len(cg) > 0 {
		t.Fatalf("cgroups left: %v", cg)
	}
	log, _ := os.ReadFile(filepath.Join(dir, "ctr.log"))
	if !strings.Contains(string(log), " stdout F up") {
		t.Fatalf("k8s-file log %q", log)
	}
	cleanupTestCgroups()
}

func TestCreateReportsRuntimeError(t *testing.T) {
	r := newRuntime(t)
	ctx := context.Background()
	id := "berth-runtime-test-missing"
	dir := bundle(t, id, false, "/no/such/command")
	defer r.Delete(ctx, id, true)
	_, err := r.Create(ctx, CreateOptions{ID: id, Name: "m", Bundle: dir, LogPath: filepath.Join(dir, "ctr.log")})
	var ce *CreateError
	if !errors.As(err, &ce) || !strings.Contains(ce.Message, "/no/such/command") {
		t.Fatalf("create error %v", err)
	}
}

// TestKillRightAfterStart: a SIGTERM sent the moment a container is started
// reaches its init once that init handles it; it is not dropped while runc's
// init is still replacing itself or before the process has set its trap
// (a PID namespace's init ignores signals it does not handle).
func TestKillRightAfterStart(t *testing.T) {
	r := newRuntime(t)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		id := fmt.Sprintf("berth-runtime-test-term-%d", i)
		dir := bundle(t, id, false, "sh", "-c", "trap 'exit 7' TERM; while true; do sleep 0.05; done")
		mustCreate(t, r, id, dir)
		t.Cleanup(func() { r.Delete(ctx, id, true) })
		mustStart(t, r, id)
		if err := r.Kill(ctx, id, syscall.SIGTERM, false); err != nil {
			t.Fatal(err)
		}
		if code := waitExit(t, r, id); code != 7 {
			t.Fatalf("run %d: exit code %d after SIGTERM, want 7 (the trap's)", i, code)
		}
		if err := r.DeleteExited(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	cleanupTestCgroups()
}

// TestContainerEnvironmentIsItsSpecs: the runtime runs with the engine's
// settings for it (GOGC, GOMEMLIMIT), which must not reach the container's
// processes: their environment is the spec's alone, at create and in exec.
func TestContainerEnvironmentIsItsSpecs(t *testing.T) {
	testdeadline.Set(t, time.Minute)
	r := newRuntime(t)
	ctx := context.Background()
	id := "berth-runtime-test-env"
	dir := newContainer(t, r, id, "sh", "-c", "export -p; sleep 30")
	logPath := filepath.Join(dir, "ctr.log")
	mustStart(t, r, id)
	var logged string
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logged, "PATH") && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		data, _ := os.ReadFile(logPath)
		logged = string(data)
	}
	var out bytes.Buffer
	p, err := r.Exec(ctx, &core.Container{ID: id, Bundle: dir}, core.ExecRequest{Process: specs.Process{Args: []string{"sh", "-c", "export -p"}, Cwd: "/", Env: []string{"PATH=/bin"}}, Stdout: &out, Stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(); err != nil || code != 0 {
		t.Fatalf("exec export -p: %d %v", code, err)
	}
	for what, env := range map[string]string{"the container": logged, "an exec": out.String()} {
		if !strings.Contains(env, "PATH='/bin'") || strings.Contains(env, "GOGC") || strings.Contains(env, "GOMEMLIMIT") {
			t.Fatalf("environment of %s:\n%s", what, env)
		}
	}
	r.Kill(ctx, id, syscall.SIGKILL, true)
}

// TestKillAllCreatedAndRunning: SIGKILL to every process of a container
// with its own PID namespace ends it at once, whether it runs (its init
// and a child, the namespace going with its init) or was only created
// (runc's init still waiting for the start, which a signal other than
// SIGKILL would wait for).
func TestKillAllCreatedAndRunning(t *testing.T) {
	r := newRuntime(t)
	ctx := context.Background()
	for _, start := range []bool{false, true} {
		id := fmt.Sprintf("berth-runtime-test-killall-%v", start)
		dir := bundle(t, id, false, "sh", "-c", "sleep 600 & trap '' TERM; while true; do sleep 0.05; done")
		mustCreate(t, r, id, dir)
		if start {
			mustStart(t, r, id)
			time.Sleep(100 * time.Millisecond)
		}
		began := time.Now()
		if err := r.Kill(ctx, id, syscall.SIGKILL, true); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(began); took > 200*time.Millisecond {
			t.Fatalf("started %v: the kill took %v", start, took)
		}
		if code := waitExit(t, r, id); code != 137 {
			t.Fatalf("started %v: exit code %d after SIGKILL, want 137", start, code)
		}
		if err := r.DeleteExited(ctx, id); err != nil {
			t.Fatalf("started %v: %v (a process outlived the kill?)", start, err)
		}
	}
	cleanupTestCgroups()
}

// TestStateFromFilesAgreesWithRunc: the state read from runc's files is
// what "runc state" answers, created, running, paused, resumed and after the
// container's exit.
func TestStateFromFilesAgreesWithRunc(t *testing.T) {
	testdeadline.Set(t, time.Minute)
	r := newRuntime(t)
	ctx := context.Background()
	id := "berth-runtime-test-statefiles"
	newContainer(t, r, id, "sleep", "100")
	agree := func(want string) {
		t.Helper()
		out, err := r.run(ctx, "state", id)
		if err != nil {
			t.Fatal(err)
		}
		var fromRunc State
		json.Unmarshal(out, &fromRunc)
		fromFiles, ok := r.stateFromFiles(id)
		if !ok || fromFiles.Status != want || fromRunc.Status != want || (want != "stopped" && fromFiles.Pid != fromRunc.Pid) {
			t.Fatalf("want %s: runc says %+v, the files (ok %v) %+v", want, fromRunc, ok, fromFiles)
		}
	}
	agree("created")
	mustStart(t, r, id)
	agree("running")
	if err := r.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	agree("paused")
	if err := r.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	agree("running")
	if err := r.Kill(ctx, id, syscall.SIGKILL, false); err != nil {
		t.Fatal(err)
	}
	waitExit(t, r, id)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if st, ok := r.stateFromFiles(id); ok && st.Status == "stopped" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the files never said stopped")
		}
	}
	agree("stopped")
}
