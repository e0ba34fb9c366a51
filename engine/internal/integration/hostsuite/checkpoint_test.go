package hostsuite

import (
	"bytes"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
)

// tcpCounter holds an established TCP connection over its loopback, IPv4
// on both ends (in the VM, Debian 12's CRIU 3.17 restores no IPv6 TCP
// socket into the container's restored namespace: an IPv4-mapped peer is
// "Can't connect inet socket back: Network is unreachable", ::1 "Can't
// bind inet socket back: Cannot assign requested address"; busybox nc
// listens on IPv6 unless given an address): a
// busybox nc server (its output is the container's log; its input a pipe
// that stays open, or it would hang up) and an nc client
// sending a counter, one number a line, five a second. Every logged number
// went through the connection, so numbers that go on after a restore show
// both the process memory (the counter) and the connection came back.
var tcpCounter = []string{"sh", "-c", "sleep 100000 | nc -l -p 7000 127.0.0.1 & sleep 1; i=0; while true; do echo $i; i=$((i+1)); sleep 0.2; done | nc 127.0.0.1 7000"}

// logNumbers are the numbers a tcpCounter container logged (k8s-file log).
func (l *lab) logNumbers(id string) []int {
	l.t.Helper()
	var d struct {
		HostConfig struct{ LogConfig struct{ Path string } }
	}
	l.decode(l.must(http.StatusOK, "GET", "/containers/"+id+"/json", nil), &d)
	data, err := os.ReadFile(d.HostConfig.LogConfig.Path)
	if err != nil && !os.IsNotExist(err) {
		l.t.Fatal(err)
	}
	var out []int
	for _, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		parts := strings.SplitN(line, " ", 4)
		if len(parts) != 4 {
			continue
		}
		n, err := strconv.Atoi(parts[3])
		if err != nil {
			l.t.Fatalf("container %s logged %q", id, parts[3])
		}
		out = append(out, n)
	}
	return out
}

// countsOnFrom waits for the container to log three more numbers (over
// its TCP connection) and checks they go on from at least from, without
// starting over at 0. It returns the last number logged.
func (l *lab) countsOnFrom(id string, from int, already int) int {
	l.t.Helper()
	var nums []int
	eventually(l.t, 60*time.Second, "container "+id+" logs three more numbers over its TCP connection", func() bool {
		nums = l.logNumbers(id)
		return len(nums) >= already+3
	})
	for _, n := range nums[already:] {
		if n < from {
			l.t.Fatalf("container %s went back: checkpointed at %d, then logged %v", id, from, nums[already:])
		}
	}
	return nums[len(nums)-1]
}

// criuMust is must(200) for a checkpoint or restore request: on a failure
// it prints the end of the CRIU log the error names (the lines before
// CRIU's Error lines say why; the host lab keeps nothing else).
func (l *lab) criuMust(method, path string, body any) []byte {
	l.t.Helper()
	status, data := l.do(method, path, body)
	if status == http.StatusOK {
		return data
	}
	if m := regexp.MustCompile(`log file: (\S+?\.log)`).FindSubmatch(data); m != nil {
		if log, err := os.ReadFile(string(m[1])); err == nil {
			// The lines before CRIU's first Error line say why.
			lines := strings.Split(string(log), "\n")
			end := len(lines)
			for i, line := range lines {
				if strings.Contains(line, "Error (") {
					end = i + 1
					break
				}
			}
			l.t.Logf("%s (up to its first error):\n%s", m[1], strings.Join(lines[max(0, end-150):end], "\n"))
		}
	}
	l.t.Fatalf("%s %s: %d %s", method, path, status, data)
	return nil
}

// restoreLog is CRIU's restore.log of container id (its State.RestoreLog,
// else the checkpoint directory's).
func (l *lab) restoreLog(id string) string {
	l.t.Helper()
	var d struct {
		State struct{ RestoreLog, CheckpointPath string }
	}
	l.decode(l.must(http.StatusOK, "GET", "/containers/"+id+"/json", nil), &d)
	if d.State.RestoreLog != "" {
		return d.State.RestoreLog
	}
	return d.State.CheckpointPath + "/restore.log"
}

// procCgroup is the unified-hierarchy cgroup of process pid (its "0::"
// line; on cgroup v1, the path of its first line).
func procCgroup(t testing.TB, pid int) string {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if strings.HasPrefix(line, "0::") {
			return strings.TrimPrefix(line, "0::")
		}
	}
	_, p, _ := strings.Cut(strings.SplitN(string(data), "\n", 2)[0], ":")
	_, p, _ = strings.Cut(p, ":")
	return p
}

// checkRestoredCgroup checks that a restored container runs in the cgroup
// its manager places it in: under systemd its scope (and conmon's) is
// active and holds the container's process.
func (l *lab) checkRestoredCgroup(id string) {
	l.t.Helper()
	var d struct {
		State struct {
			Pid        int
			ConmonPid  int
			CgroupPath string
			Restored   bool
		}
		HostConfig struct{ CgroupManager string }
	}
	l.decode(l.must(http.StatusOK, "GET", "/containers/"+id+"/json", nil), &d)
	if !d.State.Restored || d.State.Pid == 0 {
		l.t.Fatalf("restored container %s: %+v", id, d.State)
	}
	own, err := os.ReadFile("/proc/" + strconv.Itoa(d.State.Pid) + "/cgroup")
	if err != nil {
		l.t.Fatal(err)
	}
	if !strings.Contains(string(own), d.State.CgroupPath+"\n") {
		units, _ := systemctl(l.t, "list-units", "--all", "--no-legend", "berth*")
		if d.HostConfig.CgroupManager == "systemd" {
			// Known defect (issue 21), seen in the host lab with and
			// without the freeze before the dump: under the systemd
			// manager an imported container's process lands in the
			// cgroup of the container it was exported from (the path
			// in CRIU's images), which is no unit, and its own scope
			// is gone. Logged, not failed, until fixed; the removal
			// below must still leave the cgroup inspect names gone.
			l.t.Logf("KNOWN DEFECT: restored process %d of container %s is in %s, inspect says %s; units: %s", d.State.Pid, id, strings.TrimSpace(string(own)), d.State.CgroupPath, units)
			return
		}
		l.t.Fatalf("restored process %d of container %s is in %s, inspect says %s", d.State.Pid, id, own, d.State.CgroupPath)
	}
	if d.HostConfig.CgroupManager != "systemd" {
		return
	}
	if want := "/berth.slice/berth-" + id + ".scope"; d.State.CgroupPath != want {
		l.t.Fatalf("restored container's cgroup %s, want %s", d.State.CgroupPath, want)
	}
	for _, u := range []string{"berth-" + id + ".scope", "berth-conmon-" + id + ".scope"} {
		if got := unitState(l.t, u); got != "active" {
			l.t.Fatalf("after the restore unit %s is %q", u, got)
		}
	}
	conmonCg, _ := os.ReadFile("/proc/" + strconv.Itoa(d.State.ConmonPid) + "/cgroup")
	if !strings.Contains(string(conmonCg), "/berth.slice/berth-conmon-"+id+".scope") {
		l.t.Fatalf("the restored container's conmon is not in its scope: %s", conmonCg)
	}
}

// TestCheckpointInHostLab: a running container is checkpointed, restored
// in place, exported and imported under another name on the same engine,
// and each time counts on from where it stopped, in the cgroup (in the VM
// the systemd scope) the engine's default manager gives it; removal leaves
// no cgroup. "counter" is a plain counter; "tcp-established" holds an
// established TCP connection that carries its counter: its checkpoint
// without tcpEstablished is refused (CRIU's line in the 500, the container
// runs on), and with it the connection carries data after each restore.
// CRIU 4.1.1 cannot dump a TCP socket on the development machines' kernel
// (docs/engine/checkpoint.md): the host lab (Debian 12, CRIU 3.17) is
// where this runs.
func TestCheckpointInHostLab(t *testing.T) {
	if os.Getenv("BERTH_HOSTLAB") != "1" {
		t.Skip("runs in the host lab (hack/hostlab.sh): CRIU cannot dump TCP sockets on this kernel (SO_PASSSEC), and the in-place cases run in the containers package here")
	}
	enginetest.RequireCRIU(t)
	t.Run("counter", func(t *testing.T) {
		checkpointAround(t, "count", []string{"sh", "-c", "i=0; while true; do echo $i; i=$((i+1)); sleep 0.2; done"}, "")
	})
	t.Run("tcp-established", func(t *testing.T) {
		checkpointAround(t, "tcpcount", tcpCounter, "tcpEstablished=true")
	})
}

// checkpointAround runs the container and takes it through a checkpoint
// and restore in place and an export and import (see
// TestCheckpointInHostLab); q is added to each request's query.
func checkpointAround(t *testing.T, name string, cmd []string, q string) {
	l := startLab(t)
	id := l.run(map[string]any{"name": name, "command": cmd,
		"log_configuration": map[string]any{"driver": "k8s-file"}})
	eventually(t, 60*time.Second, "the counter logs", func() bool { return len(l.logNumbers(id)) >= 3 })

	if q != "" {
		status, body := l.do("POST", "/containers/"+id+"/checkpoint", nil)
		if status != http.StatusInternalServerError || !bytes.Contains(body, []byte("tcp-established")) {
			t.Fatalf("checkpoint of a container with an established connection without tcpEstablished: %d %s", status, body)
		}
		if !l.inspect(id).State.Running {
			t.Fatal("a refused checkpoint left the container not running")
		}
		l.countsOnFrom(id, 0, len(l.logNumbers(id)))
	}

	// In place.
	start := time.Now()
	l.criuMust("POST", "/containers/"+id+"/checkpoint?"+q, nil)
	dumped := time.Since(start)
	if st := l.inspect(id).State; st.Running || st.Status != "exited" {
		t.Fatalf("after the checkpoint: %+v", st)
	}
	nums := l.logNumbers(id)
	at := nums[len(nums)-1]
	start = time.Now()
	if q != "" {
		status, body := l.do("POST", "/containers/"+id+"/restore?"+q, nil)
		restoreLog, _ := os.ReadFile(l.restoreLog(id))
		if status != http.StatusOK && bytes.Contains(restoreLog, []byte("Can't connect inet socket back: Network is unreachable")) {
			// Known (issue 21): the dump of the established connection
			// works in the VM, its restore does not yet — CRIU 3.17
			// finds no route to 127.0.0.1 in the container's restored
			// network namespace when it reconnects the socket.
			t.Skipf("KNOWN: the restore of an established TCP connection fails in the VM: %s", body)
		}
		if status != http.StatusOK {
			l.criuMust("POST", "/containers/"+id+"/restore?"+q, nil)
		}
	} else {
		l.criuMust("POST", "/containers/"+id+"/restore?"+q, nil)
	}
	restored := time.Since(start)
	t.Logf("in place: checkpoint %v, restore %v (CRIU from PATH, cgroup manager %s)", dumped.Round(time.Millisecond), restored.Round(time.Millisecond), defaultManager())
	l.checkRestoredCgroup(id)
	restoredCg := procCgroup(t, l.inspect(id).State.Pid)
	last := l.countsOnFrom(id, at, len(nums))

	// Exported and imported under another name on the same engine.
	archive := l.criuMust("POST", "/containers/"+id+"/checkpoint?export=true&"+q, nil)
	var report struct {
		ID string `json:"Id"`
	}
	l.decode(l.criuMust("POST", "/containers/import/restore?import=true&name="+name+"-moved&"+q, bytes.NewReader(archive)), &report)
	moved := l.inspect(name + "-moved").ID
	if report.ID != moved || moved == id {
		t.Fatalf("import report %+v, %s-moved is %s", report, name, moved)
	}
	l.checkRestoredCgroup(moved)
	l.countsOnFrom(moved, last, 0)

	// Removal leaves no cgroup behind: neither the one inspect names nor
	// the one the restored processes really ran in.
	named := l.inspect(moved).State.CgroupPath
	stray := []string{procCgroup(t, l.inspect(moved).State.Pid), restoredCg}
	for _, c := range []string{id, moved} {
		l.must(http.StatusOK, "DELETE", "/containers/"+c+"?force=true&timeout=0", nil)
	}
	eventually(t, 10*time.Second, "cgroup "+named+" removed", func() bool { return cgroupGone(named) })
	for _, cg := range stray {
		if cg == named {
			continue
		}
		if defaultManager() != "systemd" {
			eventually(t, 10*time.Second, "cgroup "+cg+" removed", func() bool { return cgroupGone(cg) })
			continue
		}
		// The known defect above: the cgroup the restored processes ran
		// in is no unit, and removal leaves it (empty) behind.
		time.Sleep(time.Second)
		if !cgroupGone(cg) {
			t.Logf("KNOWN DEFECT: removal left the restored processes' cgroup %s", cg)
		}
	}
	if defaultManager() == "systemd" {
		for _, u := range []string{"berth-" + moved + ".scope", "berth-conmon-" + moved + ".scope"} {
			if got := unitState(t, u); got == "active" {
				t.Errorf("unit %s is still %s after removal", u, got)
			}
		}
	}
}
