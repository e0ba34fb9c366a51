package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// runc keeps a created container's init process blocked opening
// <state>/<id>/exec.fifo for writing; "runc start" opens it for reading,
// reads the byte init writes, and removes the fifo. startViaFifo does the
// same in-process, saving the runtime's process start-up on every container
// start; any surprise falls back to "runc start".
func (r *Runtime) startViaFifo(id string) error {
	path := filepath.Join(r.stateRoot, id, "exec.fifo")
	if _, err := os.Stat(path); err != nil {
		return err
	}
	type result struct {
		f   *os.File
		err error
	}
	ch := make(chan result, 1)
	go func() {
		f, err := os.OpenFile(path, os.O_RDONLY, 0)
		ch <- result{f, err}
	}()
	var res result
	select {
	case res = <-ch:
	case <-time.After(time.Second):
		// init is gone: become a writer so the blocked open returns.
		if w, err := os.OpenFile(path, os.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		res = <-ch
		if res.f != nil {
			res.f.Close()
		}
		return errors.New("container init did not open its exec fifo")
	}
	if res.err != nil {
		return res.err
	}
	defer res.f.Close()
	data, err := io.ReadAll(res.f)
	if err != nil {
		return err
	}
	if len(data) == 0 {
		return errors.New("container init exited before it was started")
	}
	return os.Remove(path)
}

// runcState is the part of runc's state.json deleteStopped and
// signalInit need.
type runcState struct {
	CgroupPaths map[string]string `json:"cgroup_paths"`
	InitPID     int               `json:"init_process_pid"`
	InitStart   uint64            `json:"init_process_start"`
}

// ownPIDNamespace tells whether runc gave the container a PID namespace of
// its own (rather than the host's or another container's).
func (r *Runtime) ownPIDNamespace(id string) bool {
	data, err := os.ReadFile(filepath.Join(r.stateRoot, id, "state.json"))
	if err != nil {
		return false
	}
	var st struct {
		Config struct {
			Namespaces []struct {
				Type string `json:"type"`
				Path string `json:"path"`
			} `json:"namespaces"`
		} `json:"config"`
	}
	if json.Unmarshal(data, &st) != nil {
		return false
	}
	for _, ns := range st.Config.Namespaces {
		if ns.Type == "NEWPID" {
			return ns.Path == ""
		}
	}
	return false
}

// signalInit waits at most initSignalWait for runc's init to become the
// container's process and for that process to block or catch the signal.
// A process that has slept (waited on something) for handlerWait, or run
// on a CPU for handlerCPU, without doing so is taken to leave the signal
// alone. Wall time alone does not say it: on a loaded host a process can
// wait long for a CPU to set up its handlers (seen in CI: a shell's trap
// not yet set 100 ms after its exec, and the SIGTERM lost).
const (
	initSignalWait = 2 * time.Second
	handlerWait    = 100 * time.Millisecond
	handlerCPU     = 100 * time.Millisecond
)

// onCPU is how long process pid's main thread has run on a CPU
// (/proc/PID/schedstat); ok is false where the kernel does not say.
func onCPU(pid int) (d time.Duration, ok bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(data))
	if len(f) < 1 {
		return 0, false
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	return time.Duration(ns), err == nil
}

// initTakes tells whether a container's init process pid is still runc's
// own init, whether it receives sig (it is the container's process and
// not the init of a PID namespace, or it blocks or catches sig, or sig
// cannot be ignored), and whether it is running or waiting for a CPU.
func initTakes(pid int, sig syscall.Signal) (runtimeInit, takes, runnable bool) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false, true, false
	}
	var blocked, caught uint64
	nsInit := false
	for _, line := range strings.Split(string(status), "\n") {
		key, val, _ := strings.Cut(line, ":")
		val = strings.TrimSpace(val)
		switch key {
		case "Name":
			if val == "runc" || strings.HasPrefix(val, "runc:") {
				return true, false, true
			}
		case "State":
			runnable = strings.HasPrefix(val, "R")
		case "SigBlk":
			blocked, _ = strconv.ParseUint(val, 16, 64)
		case "SigCgt":
			caught, _ = strconv.ParseUint(val, 16, 64)
		case "NSpid":
			f := strings.Fields(val)
			nsInit = len(f) > 1 && f[len(f)-1] == "1"
		}
	}
	bit := uint64(1) << (uint(sig) - 1)
	return false, !nsInit || sig == syscall.SIGKILL || sig == syscall.SIGSTOP || (blocked|caught)&bit != 0, runnable
}

// signalInit sends sig to a runc container's init process in-process, as
// "runc kill" does without --all, saving the runtime's start-up on every
// stop. Like runc it checks that the PID still belongs to the container's
// init (its start time in /proc), so a reused PID is never signalled; any
// surprise fails and the caller uses "runc kill".
func (r *Runtime) signalInit(id string, sig syscall.Signal) error {
	data, err := os.ReadFile(filepath.Join(r.stateRoot, id, "state.json"))
	if err != nil {
		return err
	}
	var st runcState
	if err := json.Unmarshal(data, &st); err != nil {
		return err
	}
	if st.InitPID <= 0 {
		return errors.New("no init process in the runtime state")
	}
	state, _, start, err := procStat(st.InitPID)
	if err != nil {
		return err
	}
	if start != st.InitStart {
		return errors.New("the init process is gone")
	}
	if state == "Z" || state == "X" {
		return errors.New("the init process has exited")
	}
	// A PID namespace's init ignores a signal it neither blocks nor
	// catches (the kernel drops it), and runc's init, which the container
	// process replaces only once started, does not pass it on: a
	// container stopped right after its start may still be runc, or may not
	// have set up its handlers yet (catatonit blocks the signals it
	// forwards). Wait for that a moment, so the signal is not lost.
	// SIGKILL is never lost: it ends runc's init as well, so it goes at
	// once (a created container's init waits for its start forever).
	deadline := time.Now().Add(initSignalWait)
	var asleep, ran0 time.Duration
	seen := false
	const step = 5 * time.Millisecond
	for sig != syscall.SIGKILL && time.Now().Before(deadline) {
		runtimeInit, takes, runnable := initTakes(st.InitPID, sig)
		if takes {
			break
		}
		if runtimeInit {
			time.Sleep(step)
			continue
		}
		// The container's process, which may never handle sig: waited
		// for while it has not had the CPU to set up its handlers.
		ran, ok := onCPU(st.InitPID)
		if !seen {
			ran0, seen = ran, true
		}
		if !runnable || !ok {
			asleep += step
		}
		if asleep > handlerWait || ok && ran-ran0 > handlerCPU {
			break
		}
		time.Sleep(step)
	}
	return unix.Kill(st.InitPID, sig)
}

// deleteStopped removes a stopped runc container's cgroups and state
// directory in-process, as "runc delete" would. It fails (and the caller
// falls back to "runc delete --force") when a process is still in a cgroup.
func (r *Runtime) deleteStopped(id string) error {
	dir := filepath.Join(r.stateRoot, id)
	data, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return err
	}
	var st runcState
	if err := json.Unmarshal(data, &st); err != nil {
		return err
	}
	for _, p := range st.CgroupPaths {
		if !strings.HasPrefix(p, "/sys/fs/cgroup/") {
			return fmt.Errorf("unexpected cgroup path %q", p)
		}
		if err := removeCgroup(p); err != nil {
			return err
		}
	}
	return os.RemoveAll(dir)
}

// removeCgroup removes an empty cgroup directory and its empty children.
func removeCgroup(p string) error {
	entries, err := os.ReadDir(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := removeCgroup(filepath.Join(p, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := unix.Rmdir(p); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove cgroup %s: %w", p, err)
	}
	return nil
}

// DeleteExited releases the runtime state of a container whose process has
// exited: in-process for runc, else (or when that fails) "runtime delete --force".
func (r *Runtime) DeleteExited(ctx context.Context, id string) error {
	if r.isPause(id) {
		return r.pauseDelete(id, true)
	}
	if r.name == "runc" {
		if err := r.deleteStopped(id); err == nil {
			return nil
		} else if errors.Is(err, os.ErrNotExist) {
			if _, serr := os.Stat(filepath.Join(r.stateRoot, id)); errors.Is(serr, os.ErrNotExist) {
				return nil
			}
		} else {
			r.logger.Debug("in-process delete failed, using the runtime", "container", id, "err", err)
		}
	}
	return r.Delete(ctx, id, true)
}
