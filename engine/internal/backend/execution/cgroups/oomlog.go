package cgroups

import (
	"bytes"
	"path"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The kernel log is the last witness of an OOM kill in a cgroup that is
// gone. Under the systemd manager systemd removes a container's scope as
// soon as its last process exits, and the scope's memory.events goes with
// it; the change that counts the kill is announced through a notification
// the kernel may hold back for up to 10 ms (it rate-limits them per file),
// long enough for systemd to remove the scope first (the engine's watch
// and conmon's then see nothing). Debian 12's systemd (252) does not
// record OOM kills of scopes either. For every OOM kill the kernel logs a
// summary line that names the victim's memory cgroup:
//
//	oom-kill:constraint=CONSTRAINT_MEMCG,...,oom_memcg=/a.scope,task_memcg=/a.scope,task=sh,pid=42,uid=0
//
// (the kernel limits these summaries to 10 in 5 s: past that burst a kill
// is missed here too).

// kmsgPath is the kernel log device; a variable for tests.
var kmsgPath = "/dev/kmsg"

// OOMKillLogged reports whether the kernel log records an OOM kill of a
// process of cgroup cg (or of a cgroup below it) at or after since. It
// reads the whole log buffer, so it is for the rare case where the
// cgroup's own count cannot be read any more. ok is false when the log
// cannot be read (no /dev/kmsg, no CAP_SYSLOG).
func OOMKillLogged(cg string, since time.Time) (killed, ok bool) {
	// Plain system calls: an os.File of a non-blocking descriptor would
	// wait in the poller at the end of the log instead of returning.
	fd, err := unix.Open(kmsgPath, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, false
	}
	defer unix.Close(fd)
	// Records carry CLOCK_MONOTONIC microseconds since boot.
	var now unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &now); err != nil {
		return false, false
	}
	boot := time.Now().Add(-time.Duration(now.Nano()))
	// One read returns one record; a record overwritten while reading
	// gives EPIPE, and the next read goes on with the oldest one left.
	buf := make([]byte, 8192)
	for {
		n, err := unix.Read(fd, buf)
		if err == unix.EPIPE || err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN || n == 0 {
			return killed, true
		}
		if err != nil {
			return false, false
		}
		at, victim, isKill := parseOOMRecord(buf[:n])
		if !isKill || boot.Add(at).Before(since.Add(-time.Second)) {
			continue
		}
		if under(victim, cg) {
			killed = true
		}
	}
}

// parseOOMRecord reads one /dev/kmsg record ("PRI,SEQ,USEC,FLAGS;TEXT\n"
// and continuation lines) and, where its text is the OOM killer's summary
// line, returns when it was logged (since boot) and the victim's memory
// cgroup (task_memcg).
func parseOOMRecord(rec []byte) (at time.Duration, memcg string, ok bool) {
	head, text, found := bytes.Cut(rec, []byte{';'})
	if !found {
		return 0, "", false
	}
	text, _, _ = bytes.Cut(text, []byte{'\n'})
	const prefix = "oom-kill:"
	if !bytes.HasPrefix(text, []byte(prefix)) {
		return 0, "", false
	}
	fields := strings.SplitN(string(head), ",", 4)
	if len(fields) < 3 {
		return 0, "", false
	}
	usec, err := strconv.ParseInt(fields[2], 10, 64)
	if err != nil || usec < 0 {
		return 0, "", false
	}
	// The task's name (task=) is the process's own choice and comes after
	// task_memcg, which the kernel writes: cut at the first ",task=" after
	// the cgroup's key.
	line := string(text[len(prefix):])
	_, rest, found := strings.Cut(line, ",task_memcg=")
	if !found {
		return 0, "", false
	}
	memcg, _, found = strings.Cut(rest, ",task=")
	if !found || !strings.HasPrefix(memcg, "/") {
		return 0, "", false
	}
	return time.Duration(usec) * time.Microsecond, memcg, true
}

// under reports whether memory cgroup path victim is cg or below it.
func under(victim, cg string) bool {
	cg = path.Clean("/" + cg)
	victim = path.Clean(victim)
	return victim == cg || strings.HasPrefix(victim, cg+"/")
}
