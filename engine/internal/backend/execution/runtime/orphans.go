package runtime

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// orphanCommands are the runtime commands the engine runs and waits for
// (conmon runs create, exec sessions keep their runtime as the process's
// parent and are left alone).
var orphanCommands = []string{"state", "pause", "resume", "kill", "delete", "update", "start", "checkpoint", "ps", "events"}

// KillOrphans kills the runtime commands on this run root that an earlier
// engine started and never saw end: one killed with SIGKILL leaves its
// runtime processes running, reparented. Left alone they race the new
// engine's view of its containers: a pause finishes after the engine has
// found the container running, a checkpoint's CRIU stops it after the
// engine has thawed it, and a runc waiting for a wedged freezer spins for
// ever. It must run before the engine reconciles its containers; the
// answer names what it killed. A command's process group goes with it
// where it leads one (a checkpoint and its CRIU).
func (r *Runtime) KillOrphans() []string {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	var killed []int
	var out []string
	for _, dir := range procs {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		cmd, ok := r.ownCommand(args)
		if !ok || parentIsConmon(pid) {
			continue
		}
		target := pid
		if pgid, err := syscall.Getpgid(pid); err == nil && pgid == pid {
			target = -pid
		}
		if syscall.Kill(target, syscall.SIGKILL) == nil {
			killed = append(killed, pid)
			out = append(out, cmd+" (pid "+strconv.Itoa(pid)+")")
		}
	}
	// Gone before the engine looks at the containers they worked on (a
	// zombie is gone enough: it holds nothing).
	for deadline := time.Now().Add(2 * time.Second); len(killed) > 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		killed = slices.DeleteFunc(killed, func(pid int) bool {
			_, state, ok := procStart(pid)
			return !ok || state == "Z"
		})
	}
	return out
}

// ownCommand tells whether args are one of orphanCommands of this runtime
// on this engine's state root, and answers the command line.
func (r *Runtime) ownCommand(args []string) (string, bool) {
	if len(args) < 4 || filepath.Base(args[0]) != filepath.Base(r.path) {
		return "", false
	}
	i := slices.Index(args, "--root")
	if i < 0 || i+1 >= len(args) || args[i+1] != r.stateRoot {
		return "", false
	}
	for _, a := range args[i+2:] {
		if slices.Contains(orphanCommands, a) {
			return strings.Join(args, " "), true
		}
		if a == "exec" || a == "init" {
			return "", false
		}
	}
	return "", false
}

// parentIsConmon tells whether pid's parent is a conmon (its commands are
// conmon's to wait for).
func parentIsConmon(pid int) bool {
	_, ppid, _, err := procStat(pid)
	if err != nil {
		return false
	}
	comm, err := os.ReadFile("/proc/" + strconv.Itoa(ppid) + "/comm")
	return err == nil && strings.TrimSpace(string(comm)) == "conmon"
}
