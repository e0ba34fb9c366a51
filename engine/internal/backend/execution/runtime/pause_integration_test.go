package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/testsupport/need"
)

var pauseOOMScoreAdj = 123

// pauseBundle writes the bundle of an infra container: catatonit (the
// given bytes) at /catatonit, run as catatonit -P in new namespaces.
func pauseBundle(t *testing.T, id string, catatonit []byte) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), id)
	rootfs := filepath.Join(dir, "rootfs")
	for _, d := range []string{"proc", "dev", "sys"} {
		os.MkdirAll(filepath.Join(rootfs, d), 0o755)
	}
	if err := os.WriteFile(filepath.Join(rootfs, "catatonit"), catatonit, 0o755); err != nil {
		t.Fatal(err)
	}
	spec := testSpec(id, rootfs, &specs.Process{Args: []string{"/catatonit", "-P"}, Cwd: "/", Env: []string{"PATH=/"},
		Rlimits:     []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Soft: 1234, Hard: 2345}, {Type: "RLIMIT_NPROC", Soft: 4321, Hard: 5432}},
		OOMScoreAdj: &pauseOOMScoreAdj})
	spec.Hostname = "pausehost"
	writeConfig(t, dir, spec)
	return dir
}

func hostCatatonitBytes(t *testing.T) []byte {
	t.Helper()
	p, err := lookPath("catatonit")
	if err != nil {
		need.Skipf(t, "pause tests need catatonit")
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, _ := strings.Cut(line, ":")
		out[k] = strings.TrimSpace(v)
	}
	return out
}

func cleanupTestCgroups() {
	parents, _ := filepath.Glob("/sys/fs/cgroup/*/berth-runtime-test")
	for _, p := range parents {
		exec.Command("rmdir", p).Run()
	}
}

// TestPauseProcess: an infra container's catatonit runs without conmon and
// runc, in its own namespaces and cgroups, chrooted, without capabilities;
// it pauses, resumes, and its exit is recorded and cleaned up as any
// container's.
func TestPauseProcess(t *testing.T) {
	requireTools(t)
	host := hostCatatonitBytes(t)
	defer cleanupTestCgroups()
	r, err := New(Options{RunRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	exits := watchExits(t, r)
	id := "berth-runtime-test-pause"
	dir := pauseBundle(t, id, host)
	defer r.Delete(ctx, id, true)
	created, err := r.Create(ctx, CreateOptions{ID: id, Name: "p", Bundle: dir, LogPath: filepath.Join(dir, "ctr.log"), Pause: true})
	if err != nil {
		t.Fatal(err)
	}
	if created.PID <= 0 || created.ConmonPID != 0 || !r.isPause(id) {
		t.Fatalf("created %+v, pause %v: want a pause process without conmon", created, r.isPause(id))
	}
	if _, err := os.Stat(filepath.Join(r.stateRoot, id)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("runc state for a pause process: %v", err)
	}
	if st, err := r.State(ctx, id); err != nil || st.Status != "created" || st.Pid != created.PID {
		t.Fatalf("state after create: %+v %v", st, err)
	}
	mustStart(t, r, id)
	if st, err := r.State(ctx, id); err != nil || st.Status != "running" {
		t.Fatalf("state after start: %+v %v", st, err)
	}
	pid := created.PID
	status := procStatus(t, pid)
	for k, want := range map[string]string{"CapEff": "0000000000000000", "CapPrm": "0000000000000000", "CapBnd": "0000000000000000", "NoNewPrivs": "1", "Name": "catatonit"} {
		if status[k] != want {
			t.Errorf("%s = %q, want %q", k, status[k], want)
		}
	}
	if f := strings.Fields(status["NSpid"]); len(f) != 2 || f[1] != "1" {
		t.Errorf("NSpid %q: want PID 1 of a namespace of its own", status["NSpid"])
	}
	rootfs := filepath.Join(dir, "rootfs")
	for _, link := range []string{"root", "cwd"} {
		if got, _ := os.Readlink(fmt.Sprintf("/proc/%d/%s", pid, link)); got != rootfs {
			t.Errorf("%s = %q, want %q", link, got, rootfs)
		}
	}
	for _, ns := range []string{"uts", "ipc", "net", "pid"} {
		mine, _ := os.Readlink("/proc/self/ns/" + ns)
		its, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, ns))
		if its == "" || its == mine {
			t.Errorf("%s namespace %q: want a new one", ns, its)
		}
	}
	if ns, err := netns.GetFromPid(pid); err != nil {
		t.Error(err)
	} else {
		h, err := netlink.NewHandleAt(ns)
		ns.Close()
		if err != nil {
			t.Fatal(err)
		}
		lo, err := h.LinkByName("lo")
		h.Close()
		if err != nil || lo.Attrs().Flags&net.FlagUp == 0 {
			t.Errorf("loopback of the new network namespace: %v, want up", err)
		}
	}
	if out, err := exec.Command("nsenter", "-t", strconv.Itoa(pid), "-u", "hostname").Output(); err != nil || strings.TrimSpace(string(out)) != "pausehost" {
		t.Errorf("hostname %q %v", out, err)
	}
	cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	for _, line := range strings.Split(strings.TrimSpace(string(cg)), "\n") {
		if !strings.HasSuffix(line, ":/berth-runtime-test/"+id) {
			t.Errorf("cgroup line %q: not the container's", line)
		}
	}
	if deny, err := os.ReadFile("/sys/fs/cgroup/devices/berth-runtime-test/" + id + "/devices.list"); err == nil && len(bytes.TrimSpace(deny)) != 0 {
		t.Errorf("devices.list %q: want every device denied", deny)
	}
	limits, _ := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	for _, want := range [][]string{{"Max open files", "1234", "2345"}, {"Max processes", "4321", "5432"}} {
		found := false
		for _, line := range strings.Split(string(limits), "\n") {
			if f := strings.Fields(strings.TrimPrefix(line, want[0])); strings.HasPrefix(line, want[0]) && len(f) >= 2 {
				found = f[0] == want[1] && f[1] == want[2]
			}
		}
		if !found {
			t.Errorf("%s: want %s/%s in\n%s", want[0], want[1], want[2], limits)
		}
	}
	if adj, _ := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid)); strings.TrimSpace(string(adj)) != strconv.Itoa(pauseOOMScoreAdj) {
		t.Errorf("oom_score_adj %q, want %d", adj, pauseOOMScoreAdj)
	}
	if _, err := os.Stat(filepath.Join(dir, "ctr.log")); err != nil {
		t.Errorf("log file: %v", err)
	}
	if got, _ := readPidFile(filepath.Join(dir, "conmon.pid")); got != pid {
		t.Errorf("conmon.pid holds %d, want the pause process %d", got, pid)
	}

	if err := r.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	if st, _ := r.State(ctx, id); st.Status != "paused" {
		t.Fatalf("state after pause: %+v", st)
	}
	if err := r.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	if st, _ := r.State(ctx, id); st.Status != "running" {
		t.Fatalf("state after resume: %+v", st)
	}
	if _, err := r.Exec(ctx, &core.Container{ID: id, Bundle: dir}, core.ExecRequest{Process: specs.Process{Args: []string{"/catatonit", "--version"}}}); !errors.Is(err, core.ErrStateConflict) {
		t.Fatalf("exec in a pause process: %v, want a state conflict", err)
	}

	if err := r.Kill(ctx, id, syscall.SIGKILL, true); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, r, id); code != 137 {
		t.Fatalf("exit code after SIGKILL: %d", code)
	}
	waitWatched(t, exits, id)
	if r.ExitPending(id) {
		t.Fatal("exit still pending after its exit file")
	}
	if st, err := r.State(ctx, id); err != nil || st.Status != "stopped" {
		t.Fatalf("state after exit: %+v %v", st, err)
	}
	deleteExited(t, r, id)
	if left, _ := filepath.Glob("/sys/fs/cgroup/*/berth-runtime-test/" + id); len(left) > 0 {
		t.Fatalf("cgroups left: %v", left)
	}
	if ProcessAlive(pid) {
		t.Fatal("pause process not reaped")
	}
}

// TestPauseNeedsTheEnginesCatatonit: a root whose /catatonit is anything
// but the host's is created by runc under conmon, like any container.
func TestPauseNeedsTheEnginesCatatonit(t *testing.T) {
	requireTools(t)
	other := append(append([]byte(nil), hostCatatonitBytes(t)...), 0)
	defer cleanupTestCgroups()
	r, err := New(Options{RunRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id := "berth-runtime-test-notpause"
	dir := pauseBundle(t, id, other)
	defer r.Delete(ctx, id, true)
	created, err := r.Create(ctx, CreateOptions{ID: id, Name: "p", Bundle: dir, LogPath: filepath.Join(dir, "ctr.log"), Pause: true})
	if err != nil {
		t.Fatal(err)
	}
	if created.ConmonPID <= 0 || r.isPause(id) {
		t.Fatalf("created %+v, pause %v: want runc under conmon", created, r.isPause(id))
	}
	if err := r.Delete(ctx, id, true); err != nil {
		t.Fatal(err)
	}
}

// TestPauseAdoptedByTheNextEngine: a runtime started on the same state
// watches the pause processes of the one before it, and records the exit
// of one that ended while none watched with the signal it was sent.
func TestPauseAdoptedByTheNextEngine(t *testing.T) {
	requireTools(t)
	host := hostCatatonitBytes(t)
	defer cleanupTestCgroups()
	runRoot := t.TempDir()
	r1, err := New(Options{RunRoot: runRoot})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id := "berth-runtime-test-adopt"
	dir := pauseBundle(t, id, host)
	if _, err := r1.Create(ctx, CreateOptions{ID: id, Name: "p", Bundle: dir, LogPath: filepath.Join(dir, "ctr.log"), Pause: true}); err != nil {
		t.Fatal(err)
	}
	defer r1.Delete(ctx, id, true)

	// Exits from before: a process that is gone, once signalled by the
	// engine and once not.
	gone := func(name string, signal int) {
		cmd := exec.Command("true")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		start, err := processStart(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		if err := os.MkdirAll(r1.pauseDir(name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := r1.writePauseState(name, pauseState{PID: cmd.Process.Pid, Start: start, Started: true, Signal: signal}); err != nil {
			t.Fatal(err)
		}
	}
	gone("signalled", int(syscall.SIGTERM))
	gone("unexplained", 0)

	r2, err := New(Options{RunRoot: runRoot})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := r2.WatchExits(wctx, func(string) {}); err != nil {
		t.Fatal(err)
	}
	if code, _, ok, _ := r2.ReadExit("signalled"); !ok || code != 143 {
		t.Errorf("exit of a process the engine had sent SIGTERM: %d %v, want 143", code, ok)
	}
	if _, _, ok, _ := r2.ReadExit("unexplained"); ok {
		t.Error("an exit file for a process that ended for no known reason")
	}
	if !r2.ExitPending(id) {
		t.Fatal("the next runtime does not watch the running pause process")
	}
	if st, err := r2.State(ctx, id); err != nil || st.Status != "created" {
		t.Fatalf("state seen by the next runtime: %+v %v", st, err)
	}
	if err := r2.Kill(ctx, id, syscall.SIGKILL, false); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, r2, id); code != 137 {
		t.Fatalf("exit code: %d", code)
	}
	if err := r2.DeleteExited(ctx, id); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob("/sys/fs/cgroup/*/berth-runtime-test/" + id); len(left) > 0 {
		t.Fatalf("cgroups left: %v", left)
	}
}
