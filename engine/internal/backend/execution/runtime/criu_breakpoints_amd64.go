package runtime

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// Offsets in the kernel's struct user (x86_64) of the debug registers
// DR0 and DR7, which PTRACE_POKEUSER writes.
const (
	userDebugReg0 = 848
	userDebugReg7 = userDebugReg0 + 7*8
	// dr7LocalEnable0 arms DR0 as an execution breakpoint of one byte.
	dr7LocalEnable0 = 1
	// atEntry is the auxiliary vector's key of the program's entry point.
	atEntry = 9
)

// probeBreakpoints tells whether an execution breakpoint set in a traced
// process's debug registers stops it: a true(1) started under ptrace gets
// one at its program's entry point, which its loader jumps to. It stops
// there where the CPU honours the breakpoint; where the hypervisor does
// not, true runs to its end.
func probeBreakpoints() (bool, error) {
	path, err := exec.LookPath("true")
	if err != nil {
		return false, err
	}
	// ptrace requests must come from the thread that traces the child.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := exec.Command(path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return false, err
	}
	pid := cmd.Process.Pid
	defer func() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}()
	var ws syscall.WaitStatus
	// The child stops with SIGTRAP once it has executed true.
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
		return false, err
	}
	if !ws.Stopped() || ws.StopSignal() != syscall.SIGTRAP {
		return false, fmt.Errorf("true did not stop after exec (%v)", ws)
	}
	entry, err := auxvEntry(pid)
	if err != nil {
		return false, err
	}
	word := make([]byte, 8)
	binary.LittleEndian.PutUint64(word, entry)
	if _, err := unix.PtracePokeUser(pid, userDebugReg0, word); err != nil {
		return false, fmt.Errorf("setting DR0: %w", err)
	}
	binary.LittleEndian.PutUint64(word, dr7LocalEnable0)
	if _, err := unix.PtracePokeUser(pid, userDebugReg7, word); err != nil {
		// The kernel refuses the breakpoint: CRIU cannot use one either.
		return false, nil
	}
	if err := syscall.PtraceCont(pid, 0); err != nil {
		return false, err
	}
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
		return false, err
	}
	if !ws.Stopped() || ws.StopSignal() != syscall.SIGTRAP {
		return false, nil
	}
	var regs syscall.PtraceRegs
	if err := syscall.PtraceGetRegs(pid, &regs); err != nil {
		return false, err
	}
	return regs.Rip == entry, nil
}

// auxvEntry reads AT_ENTRY, the program's entry point, from a process's
// auxiliary vector.
func auxvEntry(pid int) (uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/auxv", pid))
	if err != nil {
		return 0, err
	}
	for i := 0; i+16 <= len(data); i += 16 {
		if binary.LittleEndian.Uint64(data[i:]) == atEntry {
			return binary.LittleEndian.Uint64(data[i+8:]), nil
		}
	}
	return 0, fmt.Errorf("no AT_ENTRY in /proc/%d/auxv", pid)
}
