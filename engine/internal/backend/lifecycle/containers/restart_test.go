package containers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/backend/execution/runtime"
	"github.com/berth-project/berth/engine/internal/backend/platform/state"
	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/poll"
)

// startEngineProcess starts berth-engine as a process of its own on state
// in a temporary directory, with a client for it (skipped without runc and
// conmon, and in -short runs: it builds the binary; enginetest.StartProcess:
// an engine still running at the end has its objects removed, is stopped
// and has the host checked, and nothing stays mounted under the directory).
func startEngineProcess(t *testing.T) (*enginetest.Process, *testEngine) {
	t.Helper()
	requireRuntime(t)
	if testing.Short() {
		t.Skip("builds and runs the engine binary")
	}
	p := enginetest.StartProcess(t, enginetest.Options{What: "engine restart tests"})
	return p, &testEngine{p.Engine}
}

// exitWhileDown kills the engine with SIGKILL, then the process of the
// running container id, and starts the engine again: the container exits
// while no engine watches. It waits (what says for what) until the new
// engine has recorded the exit and, with mounts, until mounts counts none
// of the container's mounts that the exit releases.
func (te *testEngine) exitWhileDown(p *enginetest.Process, id, what string, mounts func() int) {
	te.T.Helper()
	pid := te.inspect(id).State.Pid
	p.Kill9()
	syscall.Kill(pid, syscall.SIGKILL)
	time.Sleep(1500 * time.Millisecond)
	p.Start()
	poll.Until(te.T, 10*time.Second, what, func() bool {
		return te.inspect(id).State.Status == "exited" && (mounts == nil || mounts() == 0)
	})
}

// TestRestartSafety kills the engine with SIGKILL while containers run and
// exit, starts it again, and checks that every container has its real state
// and exit code, that running ones kept running and logging under conmon,
// and that removing them leaves nothing behind.
func TestRestartSafety(t *testing.T) {
	p, te := startEngineProcess(t)
	te.loadBusybox()

	ticker := te.create(map[string]any{"name": "ticker", "command": []string{"sh", "-c", "i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.1; done"}})
	quitter := te.create(map[string]any{"name": "quitter", "command": []string{"sh", "-c", "sleep 1.5; exit 7"}})
	done := te.create(map[string]any{"name": "done", "command": []string{"sh", "-c", "exit 3"}})
	idle := te.create(map[string]any{"name": "idle", "command": []string{"true"}})
	for _, id := range []string{ticker, quitter, done} {
		te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	}
	if code := te.wait(done); code != 3 {
		t.Fatalf("done: exit %d", code)
	}
	te.waitLog(ticker, 2)
	tickerPid := te.inspect(ticker).State.Pid

	p.Kill9()
	// quitter exits while no engine watches; ticker keeps logging.
	time.Sleep(2500 * time.Millisecond)
	p.Start()

	d := te.inspect(ticker)
	if d.State.Status != "running" || d.State.Pid != tickerPid {
		t.Fatalf("ticker after restart: %+v (pid before %d)", d.State, tickerPid)
	}
	before := len(te.LogLines(ticker))
	te.waitLog(ticker, before+3)
	if d := te.inspect(quitter); d.State.Status != "exited" || d.State.ExitCode != 7 {
		t.Fatalf("quitter after restart: %+v", d.State)
	}
	if d := te.inspect(done); d.State.Status != "exited" || d.State.ExitCode != 3 {
		t.Fatalf("done after restart: %+v", d.State)
	}
	if d := te.inspect(idle); d.State.Status != "created" {
		t.Fatalf("idle after restart: %+v", d.State)
	}
	// The engine still controls the survivors.
	te.Must(http.StatusNoContent, "POST", "/containers/ticker/stop?timeout=0", nil)
	if d := te.inspect(ticker); d.State.Status != "exited" || d.State.ExitCode != 137 {
		t.Fatalf("ticker after stop: %+v", d.State)
	}
	te.Must(http.StatusNoContent, "POST", "/containers/quitter/start", nil)
	if code := te.wait(quitter); code != 7 {
		t.Fatalf("quitter second run: exit %d", code)
	}
	for _, id := range []string{ticker, quitter, done, idle} {
		te.Must(http.StatusOK, "DELETE", "/containers/"+id+"?force=true&timeout=0", nil)
	}
	if l := leaks(p.Root, p.RunRoot, ticker, quitter, done, idle); len(l) > 0 {
		t.Fatalf("leaked after removal:\n%s", strings.Join(l, "\n"))
	}
	p.Stop()
	if st := p.ExitState(); st == nil || !st.Success() {
		t.Fatalf("engine exit after SIGTERM: %v", fmt.Sprint(st))
	}
}

// TestRestartDeletesWhatACutCreateLeft: the engine killed between the
// runtime's create and the record of it leaves a created container (runc's
// init blocked on its exec fifo, under conmon, in the container's cgroup)
// that the record, still "configured", does not know. The next engine
// deletes it: nothing of it is left, and the container starts normally.
func TestRestartDeletesWhatACutCreateLeft(t *testing.T) {
	p, te := startEngineProcess(t)
	te.loadBusybox()
	id := te.create(map[string]any{"name": "cut", "command": []string{"sh", "-c", "echo ran"}})
	p.Kill9()

	// What the cut create left: the container in runc, created, with the
	// cgroup the engine gives it.
	created := plantCutCreate(t, p.RunRoot, id)

	p.Start()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.ProcessAlive(created.PID) || runtime.ProcessAlive(created.ConmonPID) {
		if time.Now().After(deadline) {
			t.Fatalf("the created container's init (%d) or conmon (%d) outlived the restart", created.PID, created.ConmonPID)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(p.RunRoot, "runc", id)); !os.IsNotExist(err) {
		t.Fatalf("runc state after the restart: %v", err)
	}
	if cg, _ := filepath.Glob("/sys/fs/cgroup/*/berth/berth-" + id); len(cg) > 0 {
		t.Fatalf("cgroups after the restart: %v", cg)
	}
	if st := te.inspect(id).State.Status; st != "created" {
		t.Fatalf("state after the restart: %s", st)
	}
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	if code := te.wait(id); code != 0 || strings.Join(te.LogLines(id), "") != "ran" {
		t.Fatalf("the container after the restart: exit %d, log %q", code, te.LogLines(id))
	}
	te.Must(http.StatusOK, "DELETE", "/containers/"+id, nil)
	if l := leaks(p.Root, p.RunRoot, id); len(l) > 0 {
		t.Fatalf("leaked after removal:\n%s", strings.Join(l, "\n"))
	}
}

// plantCutCreate leaves what a create cut by a kill -9 between the
// runtime's create and the record of it leaves: container id created in
// runc (its init blocked on the exec fifo, under conmon) with the cgroup the
// engine gives it, on a bundle of its own. The engine must not be running.
func plantCutCreate(t *testing.T, runRoot, id string) runtime.Created {
	t.Helper()
	rt, err := runtime.New(runtime.Options{RunRoot: runRoot})
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(t.TempDir(), "cut-bundle")
	rootfs := filepath.Join(bundle, "rootfs")
	os.MkdirAll(filepath.Join(rootfs, "bin"), 0o755)
	os.MkdirAll(filepath.Join(rootfs, "proc"), 0o755)
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Skip("needs busybox-static")
	}
	os.WriteFile(filepath.Join(rootfs, "bin/busybox"), bb, 0o755)
	spec, _ := json.Marshal(specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{Args: []string{"/bin/busybox", "sleep", "1000"}, Cwd: "/"},
		Root:    &specs.Root{Path: rootfs},
		Mounts:  []specs.Mount{{Destination: "/proc", Type: "proc", Source: "proc"}},
		Linux: &specs.Linux{CgroupsPath: "/berth/berth-" + id,
			Namespaces: []specs.LinuxNamespace{{Type: "pid"}, {Type: "mount"}, {Type: "ipc"}, {Type: "uts"}, {Type: "network"}}},
	})
	os.WriteFile(filepath.Join(bundle, "config.json"), spec, 0o600)
	created, err := rt.Create(context.Background(), runtime.CreateOptions{ID: id, Name: "cut", Bundle: bundle, LogPath: filepath.Join(bundle, "log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Delete(context.Background(), id, true) })
	if !runtime.ProcessAlive(created.PID) {
		t.Fatal("the runtime's init is not running")
	}
	return created
}

// TestRestartPolicyAfterACutRestart: a restart=always container whose
// restart was cut by a kill -9 between the runtime's create and the record
// of it (the record says exited; runc has the container, created) is
// restarted by the next engine: what the cut create left is deleted first
// (it used to fail with "container with given ID already exists" and stay
// created, its policy abandoned), and the restart count goes on from where
// it was.
func TestRestartPolicyAfterACutRestart(t *testing.T) {
	p, te := startEngineProcess(t)
	te.loadBusybox()
	// Two restarts, then on-failure gives up: exited, restart count 2.
	id := te.create(map[string]any{"name": "cutrestart", "command": []string{"sh", "-c", "echo ran; exit 3"},
		"restart_policy": "on-failure", "restart_tries": 2})
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var d struct {
			RestartCount int
			State        struct{ Status string }
		}
		json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+id+"/json", nil), &d)
		if d.RestartCount == 2 && d.State.Status == "exited" && len(te.LogLines(id)) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("on-failure:2 did not end exited after two restarts: %+v, log %q", d, te.LogLines(id))
		}
	}
	if status, body := te.Do("POST", "/containers/"+id+"/update?restartPolicy=always", nil); status >= 300 {
		t.Fatalf("update the restart policy: %d %s", status, body)
	}
	var paths struct{ ConmonPidFile string }
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+id+"/json", nil), &paths)
	// The record says exited before the exit's cleanup has deleted runc's
	// state; the cut restart comes after that cleanup.
	rt, err := runtime.New(runtime.Options{RunRoot: p.RunRoot})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); rt.Exists(id); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("runc still holds the exited container's state 10 s after its exit")
		}
	}
	p.Kill9()

	created := plantCutCreate(t, p.RunRoot, id)
	// The cut create's conmon wrote its pid where the container's does.
	os.WriteFile(paths.ConmonPidFile, []byte(fmt.Sprint(created.ConmonPID)), 0o600)
	p.Start()
	for deadline := time.Now().Add(5 * time.Second); runtime.ProcessAlive(created.PID) || runtime.ProcessAlive(created.ConmonPID); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the cut create's init (%d) or conmon (%d) outlived the restart", created.PID, created.ConmonPID)
		}
	}
	// Started at the engine's start, it runs (a fourth line), exits 3 and
	// is restarted again by its policy, the count going on from 2.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var d struct {
			RestartCount int
			State        struct{ Status, Error string }
		}
		json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+id+"/json", nil), &d)
		if d.State.Error != "" {
			t.Fatalf("after the restart: %+v", d)
		}
		if n := len(te.LogLines(id)); n >= 5 && d.RestartCount >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not restarted after the engine's restart: %+v, log %q", d, te.LogLines(id))
		}
	}
	te.Must(http.StatusOK, "DELETE", "/containers/"+id+"?force=true&timeout=0", nil)
	if l := leaks(p.Root, p.RunRoot, id); len(l) > 0 {
		t.Fatalf("leaked after removal:\n%s", strings.Join(l, "\n"))
	}
}

// TestRestartFinishesACutStart: a start cut by a kill -9 after the
// runtime's create (the record says created by the runtime, its start
// pending; runc holds the container, its init waiting) is finished by the
// next engine when the container's policy wants it running: a restart=always
// container runs (it used to stay "initialized" for ever, its policy
// abandoned). With policy "no" it stays initialized, as after podman init,
// and its client's start runs it.
func TestRestartFinishesACutStart(t *testing.T) {
	p, te := startEngineProcess(t)
	te.loadBusybox()
	always := te.create(map[string]any{"name": "cutstart-always", "command": []string{"sh", "-c", "echo ran; sleep 1000"},
		"restart_policy": "always"})
	none := te.create(map[string]any{"name": "cutstart-no", "command": []string{"sh", "-c", "echo ran; sleep 1000"}})
	t.Cleanup(func() {
		for _, id := range []string{always, none} {
			te.Do("DELETE", "/containers/"+id+"?force=true&timeout=0", nil)
		}
	})
	for _, id := range []string{always, none} {
		if status, body := te.Do("POST", "/containers/"+id+"/init", nil); status >= 300 {
			t.Fatalf("init: %d %s", status, body)
		}
	}
	p.Kill9()
	// What the kill left of a start cut between the runtime's create and
	// the process's start: the init's record, with the start pending.
	db, err := state.Open(context.Background(), filepath.Join(p.Root, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{always, none} {
		row, err := db.GetContainer(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		var data map[string]any
		if err := json.Unmarshal(row.Data, &data); err != nil {
			t.Fatal(err)
		}
		data["StartPending"] = true
		row.Data, _ = json.Marshal(data)
		if err := db.UpdateContainer(context.Background(), row); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	p.Start()

	type view struct {
		RestartCount int
		State        struct{ Status, Error string }
	}
	inspect := func(id string) view {
		var d view
		json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+id+"/json", nil), &d)
		return d
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		d := inspect(always)
		if d.State.Status == "running" && len(te.LogLines(always)) == 1 {
			if d.RestartCount != 0 {
				t.Fatalf("finishing the cut start counted a restart: %+v", d)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restart=always container whose start was cut is not running: %+v, log %q", d, te.LogLines(always))
		}
	}
	if d := inspect(none); d.State.Status != "initialized" || len(te.LogLines(none)) != 0 {
		t.Fatalf("the policy-less container whose start was cut: %+v, log %q (want initialized, not run)", d, te.LogLines(none))
	}
	te.Must(http.StatusNoContent, "POST", "/containers/"+none+"/start", nil)
	for deadline := time.Now().Add(10 * time.Second); len(te.LogLines(none)) != 1; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("started by its client, it did not run: %+v", inspect(none))
		}
	}
	for _, id := range []string{always, none} {
		te.Must(http.StatusOK, "DELETE", "/containers/"+id+"?force=true&timeout=0", nil)
	}
	for _, id := range []string{always, none} {
		if l := leaks(p.Root, p.RunRoot, id); len(l) > 0 {
			t.Fatalf("leaked after removal:\n%s", strings.Join(l, "\n"))
		}
	}
}

// TestRestartToReady reports how long the engine binary takes from its
// start to its first answer with many containers (BERTH_RESTART_BENCH=1;
// make soak): 100 running, then 500 created (never started) containers,
// three restarts after a SIGTERM and three after a SIGKILL each.
func TestRestartToReady(t *testing.T) {
	if os.Getenv("BERTH_RESTART_BENCH") != "1" {
		t.Skip("set BERTH_RESTART_BENCH=1 (make soak) to measure restart-to-ready")
	}
	requireRuntime(t)
	p, te := startEngineProcess(t)
	te.loadBusybox()
	measure := func(what string) {
		for _, how := range []string{"SIGTERM", "SIGKILL"} {
			var times []string
			for range 3 {
				if how == "SIGTERM" {
					p.Stop()
				} else {
					p.Kill9()
				}
				started := time.Now()
				p.Start()
				times = append(times, time.Since(started).Round(time.Millisecond).String())
			}
			t.Logf("restart-to-ready with %s, after %s: %s", what, how, strings.Join(times, ", "))
		}
	}
	var ids []string
	for range 100 {
		id := te.create(map[string]any{"command": []string{"sleep", "600"}})
		te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
		ids = append(ids, id)
	}
	measure("100 running containers")
	for _, id := range ids {
		te.Must(http.StatusOK, "DELETE", "/containers/"+id+"?force=true&timeout=0", nil)
	}
	for range 500 {
		te.create(map[string]any{"command": []string{"true"}})
	}
	measure("500 created containers")
}

// TestCleanRestartKeepsRunningRootfs: an engine that stops cleanly leaves
// a running container's root filesystem mounted on its side, as Podman and
// a kill -9 leave it, so that the next engine can still look the
// container's users up: an exec as a user of the image's /etc/passwd
// works after the restart, and removal unmounts the root. Before, the
// store's forced shutdown unmounted it from under the running container,
// and the exec was a 400 "no such user or group in the container".
func TestCleanRestartKeepsRunningRootfs(t *testing.T) {
	p, te := startEngineProcess(t)
	te.loadBusybox()
	id := te.create(map[string]any{"name": "kept", "command": []string{"sleep", "600"}})
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	rootfs := te.inspect(id).Rootfs
	p.Stop()
	if _, err := os.Stat(filepath.Join(rootfs, "etc", "passwd")); err != nil {
		t.Fatalf("the running container's root is gone from the engine's side after a clean stop: %v", err)
	}
	p.Start()
	var created struct {
		ID string `json:"Id"`
	}
	json.Unmarshal(te.Must(http.StatusCreated, "POST", "/containers/"+id+"/exec",
		map[string]any{"User": "nobody", "Cmd": []string{"touch", "/tmp/by-nobody"}}), &created)
	te.Must(http.StatusOK, "POST", "/exec/"+created.ID+"/start", map[string]any{"Detach": true})
	poll.Until(t, 10*time.Second, "the exec's file", func() bool {
		fi, err := os.Stat(filepath.Join(rootfs, "tmp", "by-nobody"))
		return err == nil && fi.Sys().(*syscall.Stat_t).Uid == 65534
	})
	te.Must(http.StatusOK, "DELETE", "/containers/"+id+"?force=true&timeout=0", nil)
	if mountsWhere(func(mp string) bool { return mp == rootfs }) != 0 {
		t.Fatalf("%s still mounted after the removal", rootfs)
	}
}
