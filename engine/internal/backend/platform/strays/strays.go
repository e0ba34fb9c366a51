// Package strays finds and ends the copies of an earlier engine that a
// kill -9 can leave behind.
//
// containers/storage mounts a layer for a container with a user namespace
// of its own through an idmapped mount, for which it forks the engine
// (pkg/idmap.CreateUsernsProcess) and kills the child once the mount is
// made. The child returns from its clone into the Go runtime, where it
// waits for ever for a processor that no other thread will give up (it has
// one thread), before it reaches the prctl that would have it die with its
// parent. Should the engine be killed in between, the child stays: a
// sleeping copy of the engine, with every descriptor the engine had open,
// its API listener among them, so that the next engine could not listen
// ("address already in use"; seen twice in a 5-minute chaos loop).
//
// A stray is told apart by what a live engine never is: a process running
// the engine's executable (by name) with a single thread, that holds a file
// under the engine's root open. Go programs run several threads from their
// start; conmon, runc and the containers' processes run other programs.
package strays

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Reap kills the strays of earlier engines on root (an absolute path) and
// waits, up to two seconds each, until they are gone. It answers the PIDs
// it killed; processes it cannot read are passed over.
func Reap(root string) ([]int, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	name := filepath.Base(self)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var killed []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || !isStray(pid, name, root) {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return killed, fmt.Errorf("kill stray engine copy %d: %w", pid, err)
		}
		killed = append(killed, pid)
		for deadline := time.Now().Add(2 * time.Second); alive(pid) && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
	}
	return killed, nil
}

// isStray tells whether process pid runs an executable named name, has a
// single thread and holds a file under root open.
func isStray(pid int, name, root string) bool {
	dir := fmt.Sprintf("/proc/%d", pid)
	exe, err := os.Readlink(dir + "/exe")
	if err != nil || filepath.Base(strings.TrimSuffix(exe, " (deleted)")) != name {
		return false
	}
	if threads(dir) != 1 {
		return false
	}
	fds, err := os.ReadDir(dir + "/fd")
	if err != nil {
		return false
	}
	prefix := strings.TrimSuffix(root, "/") + "/"
	for _, fd := range fds {
		target, err := os.Readlink(dir + "/fd/" + fd.Name())
		if err == nil && strings.HasPrefix(target, prefix) {
			return true
		}
	}
	return false
}

// threads reads the Threads line of a process's status (0 if unreadable).
func threads(dir string) int {
	data, err := os.ReadFile(dir + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// alive tells whether process pid still runs (a zombie is gone: it holds
// no descriptor any more).
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(data), ')')
	return i < 0 || i+2 >= len(data) || data[i+2] != 'Z'
}
