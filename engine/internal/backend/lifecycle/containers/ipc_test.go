package containers_test

import (
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/poll"
)

// TestIPCShareableAndJoined: a default container's IPC namespace is
// shareable (its /dev/shm a tmpfs the engine mounts on the host side); one
// created with ipcns container:NAME joins that namespace and the same
// /dev/shm, and starting it starts the donor first. Pod members share
// their infra container's /dev/shm. A private donor, a missing one and a
// size for a borrowed /dev/shm are 400s naming the option, creating
// nothing. The engine is killed with SIGKILL and the donor's process ends
// while no engine runs: after the restart its /dev/shm is unmounted, the
// joiner runs on, and removal leaves nothing behind.
func TestIPCShareableAndJoined(t *testing.T) {
	p, te := startEngineProcess(t)
	te.loadBusybox()
	hostNS, _ := os.Readlink("/proc/self/ns/ipc")
	procOf := func(id string) string { return "/proc/" + strconv.Itoa(te.inspect(id).State.Pid) }
	nsOf := func(id string) string {
		link, err := os.Readlink(procOf(id) + "/ns/ipc")
		if err != nil {
			t.Fatal(err)
		}
		return link
	}
	shmFile := func(id, name string) string {
		data, _ := os.ReadFile(procOf(id) + "/root/dev/shm/" + name)
		return string(data)
	}
	shmMounts := func(id string) int {
		return mountsWhere(func(p string) bool { return strings.Contains(p, id) && strings.HasSuffix(p, "/shm") })
	}
	ipcMode := func(id string) string {
		var c struct{ HostConfig struct{ IpcMode string } }
		if err := json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+id+"/json", nil), &c); err != nil {
			t.Fatal(err)
		}
		return c.HostConfig.IpcMode
	}
	writer := func(file string) []string {
		return []string{"sh", "-c", "echo " + file + " > /dev/shm/" + file + "; exec sleep 600"}
	}

	donor := te.create(map[string]any{"name": "donor", "command": writer("d")})
	joiner := te.create(map[string]any{"name": "joiner", "ipcns": map[string]string{"nsmode": "container", "value": "donor"}, "command": writer("j")})
	te.Must(http.StatusNoContent, "POST", "/containers/joiner/start", nil)
	if st := te.inspect(donor).State.Status; st != "running" {
		t.Fatalf("starting the joiner left its donor %s", st)
	}
	poll.Until(t, 10*time.Second, "each sees the other's /dev/shm file", func() bool {
		return shmFile(joiner, "d") == "d\n" && shmFile(donor, "j") == "j\n"
	})
	if nsOf(joiner) != nsOf(donor) || nsOf(donor) == hostNS {
		t.Errorf("IPC namespaces: joiner %s, donor %s, host %s", nsOf(joiner), nsOf(donor), hostNS)
	}
	if got, want := ipcMode(donor)+" "+ipcMode(joiner), "shareable container:"+donor; got != want {
		t.Errorf("IpcMode %q, want %q", got, want)
	}
	if n := shmMounts(donor); n != 1 {
		t.Errorf("the donor's /dev/shm is mounted %d times on the host, want 1", n)
	}

	private := te.create(map[string]any{"name": "private", "ipcns": map[string]string{"nsmode": "private"}, "command": writer("p")})
	te.Must(http.StatusNoContent, "POST", "/containers/private/start", nil)
	poll.Until(t, 10*time.Second, "the private container's /dev/shm file", func() bool { return shmFile(private, "p") == "p\n" })
	if n := shmMounts(private); n != 0 || ipcMode(private) != "private" {
		t.Errorf("a private container: %d host mounts of its /dev/shm, IpcMode %q", n, ipcMode(private))
	}
	size := 1 << 20
	for _, bad := range []struct {
		spec map[string]any
		want string
	}{
		{map[string]any{"ipcns": map[string]string{"nsmode": "container", "value": "private"}}, "non-shareable"},
		{map[string]any{"ipcns": map[string]string{"nsmode": "container", "value": "nosuch"}}, "nosuch"},
		{map[string]any{"ipcns": map[string]string{"nsmode": "container", "value": "donor"}, "shm_size": size}, "shm_size"},
		{map[string]any{"ipcns": map[string]string{"nsmode": "container"}}, "ipcns"},
	} {
		bad.spec["image"], bad.spec["name"] = "busybox", "refused-ipc"
		status, body := te.Do("POST", "/containers/create", bad.spec)
		if status != http.StatusBadRequest || !strings.Contains(string(body), bad.want) {
			t.Errorf("create %v: %d %s, want a 400 naming %q", bad.spec["ipcns"], status, body, bad.want)
		}
	}
	if status, _ := te.Do("GET", "/containers/refused-ipc/json", nil); status != http.StatusNotFound {
		t.Errorf("a refused create left a container (%d)", status)
	}

	// The pod's shm_size sizes the /dev/shm its members share.
	te.Must(http.StatusCreated, "POST", "/pods/create", map[string]any{"name": "ipcpod", "shm_size": 2 << 20})
	if status, body := te.Do("POST", "/pods/create", map[string]any{"name": "netonly", "shared_namespaces": []string{"net"}, "shm_size": 2 << 20}); status != http.StatusBadRequest || !strings.Contains(string(body), "shm_size") {
		t.Errorf("shm_size on a pod that shares no IPC: %d %s", status, body)
	}
	m1 := te.create(map[string]any{"name": "m1", "pod": "ipcpod", "command": writer("m1")})
	m2 := te.create(map[string]any{"name": "m2", "pod": "ipcpod", "command": writer("m2")})
	for _, id := range []string{m1, m2} {
		te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	}
	poll.Until(t, 10*time.Second, "pod members see each other's /dev/shm files", func() bool {
		return shmFile(m1, "m2") == "m2\n" && shmFile(m2, "m1") == "m1\n"
	})
	var fs syscall.Statfs_t
	if err := syscall.Statfs(procOf(m1)+"/root/dev/shm", &fs); err != nil || fs.Blocks*uint64(fs.Bsize) != 2<<20 {
		t.Errorf("a pod member's /dev/shm holds %d bytes (%v), want the pod's 2 MiB", fs.Blocks*uint64(fs.Bsize), err)
	}

	// The donor's process ends while no engine runs.
	te.exitWhileDown(p, donor, "the exited donor's /dev/shm unmounted after the restart", func() int { return shmMounts(donor) })
	if st := te.inspect(joiner).State.Status; st != "running" || shmFile(joiner, "d") != "d\n" {
		t.Errorf("the joiner after the restart: %s, /dev/shm/d %q", st, shmFile(joiner, "d"))
	}

	for _, id := range []string{joiner, donor, private, m1, m2} {
		te.Must(http.StatusOK, "DELETE", "/containers/"+id+"?force=true&timeout=0", nil)
	}
	te.Must(http.StatusOK, "DELETE", "/pods/ipcpod?force=true", nil)
	if l := leaks(p.Root, p.RunRoot, joiner, donor, private, m1, m2); len(l) > 0 {
		t.Fatalf("leaked after removal:\n%s", strings.Join(l, "\n"))
	}
}
