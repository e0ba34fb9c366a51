package hostsuite

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// criuHangAfter is how long a checkpoint or restore request may take
// before the test prints what CRIU, the runtime and the container's
// processes are doing (criuHangReport): well before the test's deadline,
// which ends the binary without a word about them.
const criuHangAfter = 90 * time.Second

// criuWatched is criuMust that, when the request has not returned after
// criuHangAfter, prints criuHangReport of container id (whose directories
// and cgroup are read before the request) while it goes on waiting.
func (l *lab) criuWatched(id, method, path string, body any) []byte {
	l.T.Helper()
	var d struct {
		StaticDir string
		State     struct{ CgroupPath string }
	}
	l.Decode(l.Must(http.StatusOK, "GET", "/containers/"+id+"/json", nil), &d)
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-done:
		case <-time.After(criuHangAfter):
			// Straight to stderr: the test deadline's os.Exit would
			// drop what t.Log buffers.
			fmt.Fprintf(os.Stderr, "\n%s %s has not returned after %v:\n%s\n", method, path, criuHangAfter,
				criuHangReport(filepath.Join(d.StaticDir, "checkpoint"), d.State.CgroupPath))
		}
	}()
	return l.criuMust(method, path, body)
}

// criuHangReport describes a checkpoint or restore that does not end: the
// CRIU logs in dir (their last lines), the container's cgroup (freeze and
// events, with its parents') and every criu, runc, crun and conmon process
// and every process of the cgroup: state, wchan, kernel stack, LSM label
// and the signals it blocks or has pending; then AppArmor's denials.
func criuHangReport(dir, cgroup string) string {
	var b strings.Builder
	for _, name := range []string{"dump.log", "restore.log"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		fmt.Fprintf(&b, "---- %s (last 80 of %d lines) ----\n%s\n", filepath.Join(dir, name), len(lines), strings.Join(lines[max(0, len(lines)-80):], "\n"))
	}
	pids := map[int]bool{}
	if cgroup != "" {
		for cg := cgroup; cg != "/" && cg != "." && cg != ""; cg = filepath.Dir(cg) {
			for _, f := range []string{"cgroup.freeze", "cgroup.events", "freezer.state"} {
				if data, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", cg, f)); err == nil {
					fmt.Fprintf(&b, "%s/%s: %s\n", cg, f, strings.Join(strings.Fields(string(data)), " "))
				}
			}
		}
		// Every process of the container's cgroup and its children.
		filepath.Walk(filepath.Join("/sys/fs/cgroup", cgroup), func(p string, info os.FileInfo, err error) error {
			if err == nil && info.Name() == "cgroup.procs" {
				data, _ := os.ReadFile(p)
				for _, f := range strings.Fields(string(data)) {
					if pid, err := strconv.Atoi(f); err == nil {
						pids[pid] = true
					}
				}
			}
			return nil
		})
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile("/proc/" + e.Name() + "/comm")
		switch strings.TrimSpace(string(comm)) {
		case "criu", "runc", "crun", "conmon", "runc:[2:INIT]":
			pids[pid] = true
		}
	}
	for pid := range pids {
		b.WriteString(procReport(pid))
	}
	// The firewall of the container's network namespace: CRIU locks the
	// network there for a dump and must unlock it when the dump fails.
	for pid := range pids {
		comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		if c := strings.TrimSpace(string(comm)); c == "conmon" || c == "criu" || c == "runc" || c == "crun" {
			continue
		}
		for _, cmd := range [][]string{{"nft", "list", "ruleset"}, {"iptables-save"}} {
			out, err := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(pid), "-n"}, cmd...)...).CombinedOutput()
			fmt.Fprintf(&b, "---- %s in the network namespace of %d (err %v) ----\n%s\n", strings.Join(cmd, " "), pid, err, out)
		}
		break
	}
	// What AppArmor denied (a denied signal fails silently where CRIU
	// ignores kill's error), and the kernel's last words (a process that
	// crashed when CRIU let go of it).
	if out, err := exec.Command("dmesg").Output(); err == nil {
		var denied []string
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		for _, line := range lines {
			if strings.Contains(line, "apparmor=\"DENIED\"") {
				denied = append(denied, line)
			}
		}
		fmt.Fprintf(&b, "---- AppArmor denials in the kernel log (last 20 of %d) ----\n%s\n", len(denied), strings.Join(denied[max(0, len(denied)-20):], "\n"))
		fmt.Fprintf(&b, "---- the kernel log's last 15 lines ----\n%s\n", strings.Join(lines[max(0, len(lines)-15):], "\n"))
	}
	return b.String()
}

// procReport is what /proc says of one process and its threads' kernel
// stacks.
func procReport(pid int) string {
	p := "/proc/" + strconv.Itoa(pid)
	var b strings.Builder
	cmdline, _ := os.ReadFile(p + "/cmdline")
	wchan, _ := os.ReadFile(p + "/wchan")
	fmt.Fprintf(&b, "---- pid %d: %s (wchan %s)\n", pid, strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " "), wchan)
	if status, err := os.ReadFile(p + "/status"); err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			for _, k := range []string{"State:", "PPid:", "TracerPid:", "SigPnd:", "ShdPnd:", "SigBlk:", "SigIgn:", "SigCgt:"} {
				if strings.HasPrefix(line, k) {
					b.WriteString("  " + line + "\n")
				}
			}
		}
	}
	if label, err := os.ReadFile(p + "/attr/current"); err == nil {
		fmt.Fprintf(&b, "  LSM label: %s\n", strings.TrimSpace(string(label)))
	}
	if cg, err := os.ReadFile(p + "/cgroup"); err == nil {
		fmt.Fprintf(&b, "  cgroup: %s\n", strings.TrimSpace(string(cg)))
	}
	tasks, _ := os.ReadDir(p + "/task")
	for _, task := range tasks {
		tp := p + "/task/" + task.Name()
		stat, _ := os.ReadFile(tp + "/stat")
		twchan, _ := os.ReadFile(tp + "/wchan")
		stack, _ := os.ReadFile(tp + "/stack")
		st := string(stat)
		if i := strings.LastIndexByte(st, ')'); i >= 0 && i+4 <= len(st) {
			st = st[i+2 : i+3]
		}
		fmt.Fprintf(&b, "  task %s state %s wchan %s\n", task.Name(), st, twchan)
		for _, line := range strings.Split(strings.TrimSpace(string(stack)), "\n") {
			if line != "" {
				b.WriteString("    " + line + "\n")
			}
		}
	}
	return b.String()
}

// runsOnAfterRefusal is countsOnFrom(id, 0, ...) after a checkpoint the
// engine refused: where the container does not log on, it prints
// criuHangReport (the kept dump.log, the processes, the firewall of the
// container's network namespace) before failing.
func (l *lab) runsOnAfterRefusal(id string) {
	l.T.Helper()
	var d struct {
		StaticDir string
		State     struct{ CgroupPath string }
	}
	l.Decode(l.Must(http.StatusOK, "GET", "/containers/"+id+"/json", nil), &d)
	already := len(l.logNumbers(id))
	for i := 0; i < 3; i++ {
		l.T.Logf("after the refusal (+%ds), the container's processes: %s", i, cgroupProcs(d.State.CgroupPath))
		time.Sleep(time.Second)
	}
	for deadline := time.Now().Add(60 * time.Second); len(l.logNumbers(id)) < already+3; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			_, state := l.Do("GET", "/containers/"+id+"/json", nil)
			var st struct{ State any }
			json.Unmarshal(state, &st)
			l.T.Fatalf("container %s logs no more numbers after a refused checkpoint (%d logged); its state: %+v\n%s", id, already,
				st.State, criuHangReport(filepath.Join(d.StaticDir, "checkpoint"), d.State.CgroupPath))
		}
	}
	l.countsOnFrom(id, 0, already)
}

// cgroupProcs lists the processes of a cgroup: pid, state and command.
func cgroupProcs(cg string) string {
	data, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", cg, "cgroup.procs"))
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, f := range strings.Fields(string(data)) {
		stat, _ := os.ReadFile("/proc/" + f + "/stat")
		cmd, _ := os.ReadFile("/proc/" + f + "/cmdline")
		st := string(stat)
		if i := strings.LastIndexByte(st, ')'); i >= 0 && i+3 <= len(st) {
			st = st[i+2 : i+3]
		}
		out = append(out, f+" "+st+" "+strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " "))
	}
	return strings.Join(out, "; ")
}
