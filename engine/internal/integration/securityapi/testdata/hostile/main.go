// Command hostile tries, inside a container, what an attacker would: each
// argument names one attempt, and the line it prints says whether the
// kernel refused it ("refused: ERRNO") or let it through ("ALLOWED").
// The exit status is the number of attempts that were allowed. (A new user
// namespace is tried with busybox's unshare: a Go program has threads, and
// unshare(CLONE_NEWUSER) refuses a threaded caller whatever the filter.)
package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

var attempts = map[string]func(arg string) error{
	"mount-proc": func(string) error {
		if err := os.MkdirAll("/tmp/proc", 0o755); err != nil {
			return err
		}
		return unix.Mount("proc", "/tmp/proc", "proc", 0, "")
	},
	// The kernel keyring is not namespaced.
	"keyctl": func(string) error {
		_, err := unix.KeyctlJoinSessionKeyring("hostile")
		return err
	},
	"init-module": func(string) error { return unix.InitModule([]byte("\x7fELF"), "") },
	"sysrq": func(string) error {
		f, err := os.OpenFile("/proc/sysrq-trigger", os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		// "h" only prints help to the kernel log, were it ever written.
		_, err = f.Write([]byte("h"))
		return err
	},
	"kcore": func(string) error {
		f, err := os.Open("/proc/kcore")
		if err != nil {
			return err
		}
		defer f.Close()
		buf := make([]byte, 16)
		n, err := f.Read(buf)
		if n == 0 {
			return fmt.Errorf("read %d bytes: %w", n, errors.Join(err, unix.ENODATA))
		}
		return nil
	},
	// arg is the host pid of another container's process.
	"ptrace": func(arg string) error {
		pid, err := strconv.Atoi(arg)
		if err != nil {
			return err
		}
		if err := unix.PtraceAttach(pid); err != nil {
			return err
		}
		unix.PtraceDetach(pid)
		return nil
	},
	"raw-socket": func(string) error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)
		if err == nil {
			unix.Close(fd)
		}
		return err
	},
	"packet-socket": func(string) error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
		if err == nil {
			unix.Close(fd)
		}
		return err
	},
	// CAD_OFF changes nothing even where it is allowed; in a pid namespace
	// an allowed call answers EINVAL, so only EPERM counts as refused.
	"reboot": func(string) error {
		err := unix.Reboot(unix.LINUX_REBOOT_CMD_CAD_OFF)
		if errors.Is(err, unix.EINVAL) {
			return nil
		}
		return err
	},
}

func main() {
	allowed := 0
	for _, a := range os.Args[1:] {
		name, arg, _ := cut(a)
		try, ok := attempts[name]
		if !ok {
			fmt.Printf("%s: unknown attempt\n", name)
			os.Exit(100)
		}
		err := try(arg)
		var errno syscall.Errno
		switch {
		case err == nil:
			allowed++
			fmt.Printf("%s: ALLOWED\n", name)
		case errors.As(err, &errno):
			fmt.Printf("%s: refused: %s (%d)\n", name, unix.ErrnoName(errno), int(errno))
		default:
			fmt.Printf("%s: refused: %v\n", name, err)
		}
	}
	os.Exit(allowed)
}

func cut(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '=' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}
