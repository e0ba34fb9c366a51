package containers_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestLifecycle(t *testing.T) {
	te := startEngine(t)
	id := te.create(map[string]any{"name": "life", "command": []string{"sh", "-c", "echo started; while true; do sleep 0.1; done"},
		"netns": map[string]string{"nsmode": "none"}, "labels": map[string]string{"app": "web"}})
	if st := te.inspect(id).State.Status; st != "created" {
		t.Fatalf("after create: %s", st)
	}
	te.Must(http.StatusNoContent, "POST", "/containers/life/start", nil)
	te.Must(http.StatusNotModified, "POST", "/containers/life/start", nil)
	d := te.inspect("life")
	if !d.State.Running || d.State.Pid <= 0 || d.State.ConmonPid <= 0 || d.State.StartedAt.IsZero() {
		t.Fatalf("after start: %+v", d.State)
	}
	if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(d.State.Pid))); err != nil {
		t.Fatalf("container process %d: %v", d.State.Pid, err)
	}

	te.Must(http.StatusNoContent, "POST", "/containers/"+id[:12]+"/pause", nil)
	if d := te.inspect(id); d.State.Status != "paused" || !d.State.Paused {
		t.Fatalf("after pause: %+v", d.State)
	}
	te.Must(http.StatusConflict, "POST", "/containers/life/pause", nil)
	te.Must(http.StatusNoContent, "POST", "/containers/life/unpause", nil)
	if st := te.inspect(id).State.Status; st != "running" {
		t.Fatalf("after unpause: %s", st)
	}

	// busybox sh as PID 1 ignores SIGTERM: stop must fall back to SIGKILL after the timeout.
	start := time.Now()
	te.Must(http.StatusNoContent, "POST", "/containers/life/stop?timeout=1", nil)
	if el := time.Since(start); el < time.Second || el > 8*time.Second {
		t.Fatalf("stop with timeout 1 took %v", el)
	}
	d = te.inspect(id)
	if d.State.Status != "exited" || d.State.ExitCode != 137 || d.State.Running || d.State.FinishedAt.IsZero() {
		t.Fatalf("after stop: %+v", d.State)
	}
	te.Must(http.StatusNotModified, "POST", "/containers/life/stop", nil)
	te.Must(http.StatusConflict, "POST", "/containers/life/kill", nil)

	te.Must(http.StatusNoContent, "POST", "/containers/life/restart?timeout=0", nil)
	if st := te.inspect(id).State.Status; st != "running" {
		t.Fatalf("after restart: %s", st)
	}
	te.waitLog(id, 2)
	te.Must(http.StatusNoContent, "POST", "/containers/life/kill?signal=KILL", nil)
	if code := te.wait(id); code != 137 {
		t.Fatalf("wait after kill: %d", code)
	}
	if got := te.LogLines(id); len(got) != 2 || got[0] != "started" || got[1] != "started" {
		t.Fatalf("log after two starts: %q", got)
	}
	te.Must(http.StatusNoContent, "POST", "/containers/life/start", nil)
	te.Must(http.StatusConflict, "DELETE", "/containers/life", nil)
	var rm []struct {
		ID string `json:"Id"`
	}
	json.Unmarshal(te.Must(http.StatusOK, "DELETE", "/containers/life?force=true&timeout=0", nil), &rm)
	if len(rm) != 1 || rm[0].ID != id {
		t.Fatalf("remove report %+v", rm)
	}
	te.Must(http.StatusNotFound, "GET", "/containers/life/json", nil)
	te.Must(http.StatusNotFound, "GET", "/containers/life/exists", nil)
	te.noLeaks(id)
}

func TestKillSignalsAndWaitConditions(t *testing.T) {
	te := startEngine(t)
	id := te.create(map[string]any{"command": []string{"sh", "-c", "trap 'exit 42' USR1; echo ready; while true; do sleep 0.05; done"}})
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	if code := te.wait(id, "running"); code != 0 {
		t.Fatalf("wait running: %d", code)
	}
	// PID 1 ignores signals it has no handler for: wait until the trap is set.
	te.waitLog(id, 1)
	te.Must(http.StatusBadRequest, "POST", "/containers/"+id+"/kill?signal=NOPE", nil)
	te.Must(http.StatusBadRequest, "POST", "/containers/"+id+"/wait?condition=bogus", nil)
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/kill?signal=10", nil)
	if code := te.wait(id, "exited"); code != 42 {
		t.Fatalf("exit code after USR1 trap: %d", code)
	}
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	te.waitLog(id, 2)
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/kill?signal=SIGUSR1", nil)
	if code := te.wait(id); code != 42 {
		t.Fatalf("exit code after SIGUSR1 by name: %d", code)
	}
}

func TestCreateValidationAndErrors(t *testing.T) {
	te := startEngine(t)
	te.create(map[string]any{"name": "taken"})
	cases := []struct {
		body   any
		status int
		field  string
	}{
		{map[string]any{"image": "nosuchimage:1"}, http.StatusNotFound, ""},
		{map[string]any{"image": "busybox", "name": "taken"}, http.StatusConflict, ""},
		{map[string]any{"image": "busybox", "name": "bad name!"}, http.StatusBadRequest, "name"},
		{map[string]any{"image": "busybox", "env": 5}, http.StatusBadRequest, "env"},
		{map[string]any{"image": "busybox", "r_limits": []map[string]any{{"type": "nofile", "hard": "x", "soft": 1}}}, http.StatusBadRequest, "r_limits"},
		{map[string]any{"image": "busybox", "r_limits": []map[string]any{{"type": "bogus", "hard": 1, "soft": 1}}}, http.StatusBadRequest, "r_limits[0].type"},
		{map[string]any{"image": "busybox", "mounts": []map[string]any{{"destination": "rel", "type": "bind", "source": "/tmp"}}}, http.StatusBadRequest, "mounts[0].destination"},
		{map[string]any{"image": "busybox", "mounts": []map[string]any{{"destination": "/x", "type": "nfs", "source": "a"}}}, http.StatusBadRequest, "mounts[0].type"},
		{map[string]any{"image": "busybox", "netns": map[string]string{"nsmode": "slirp4netns"}}, http.StatusBadRequest, "netns"},
		{map[string]any{"image": "busybox", "restart_policy": "sometimes"}, http.StatusBadRequest, "restart_policy"},
		{map[string]any{"image": "busybox", "remove": true, "restart_policy": "always"}, http.StatusBadRequest, "restart_policy"},
		{map[string]any{"image": "busybox", "user": "nosuchuser"}, http.StatusBadRequest, "user"},
		{map[string]any{"image": "busybox", "cap_add": []string{"NOT_A_CAP"}}, http.StatusBadRequest, "cap_add"},
		{map[string]any{"image": "busybox", "resource_limits": map[string]any{"memory": map[string]any{"limit": 100}}}, http.StatusBadRequest, "resource_limits.memory.limit"},
		{map[string]any{}, http.StatusBadRequest, "image"},
		{"{not json", http.StatusBadRequest, "body"},
	}
	for _, c := range cases {
		status, body := te.Do("POST", "/containers/create", c.body)
		var e struct {
			Message  string `json:"message"`
			Response int    `json:"response"`
		}
		json.Unmarshal(body, &e)
		if status != c.status || e.Response != c.status {
			t.Errorf("%v: status %d (%s), want %d", c.body, status, body, c.status)
			continue
		}
		if c.field != "" && !strings.Contains(e.Message, "invalid "+c.field) {
			t.Errorf("%v: message %q does not name field %q", c.body, e.Message, c.field)
		}
	}
	var list []json.RawMessage
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/json?all=true", nil), &list)
	if len(list) != 1 {
		t.Fatalf("failed creates left containers behind: %d listed", len(list))
	}
	for _, route := range []struct{ method, path string }{
		{"GET", "/containers/nosuch/json"}, {"POST", "/containers/nosuch/start"}, {"POST", "/containers/nosuch/stop"},
		{"POST", "/containers/nosuch/kill"}, {"POST", "/containers/nosuch/pause"}, {"POST", "/containers/nosuch/unpause"},
		{"POST", "/containers/nosuch/restart"}, {"POST", "/containers/nosuch/wait"}, {"DELETE", "/containers/nosuch"},
		{"POST", "/containers/nosuch/init"}, {"POST", "/containers/nosuch/update"}, {"GET", "/containers/nosuch/exists"},
	} {
		if status, body := te.Do(route.method, route.path, nil); status != http.StatusNotFound {
			t.Errorf("%s %s: %d %s, want 404", route.method, route.path, status, body)
		}
	}
	te.Must(http.StatusOK, "DELETE", "/containers/nosuch?ignore=true", nil)
}

func TestMissingCommandFailsStartAndIsRemovable(t *testing.T) {
	te := startEngine(t)
	id := te.create(map[string]any{"command": []string{"/no/such/binary"}})
	status, body := te.Do("POST", "/containers/"+id+"/start", nil)
	if status != http.StatusInternalServerError || !strings.Contains(string(body), "/no/such/binary") || !strings.Contains(string(body), "no such file") {
		t.Fatalf("start: %d %s", status, body)
	}
	d := te.inspect(id)
	if d.State.Status != "created" || d.State.Error == "" || d.State.Running {
		t.Fatalf("state after failed start: %+v", d.State)
	}
	te.Must(http.StatusOK, "DELETE", "/containers/"+id, nil)
	te.noLeaks(id)
}

// TestStartWaitingOnARemovalFindsNoContainer: a start (a client's, or a
// restart policy's) that waits for a container's lock while a removal
// holds it answers 404 once the removal is done, and creates nothing (it
// used to go on with the removed record: "runc create failed: chdir
// .../userdata: no such file or directory", seen in the chaos loop).
func TestStartWaitingOnARemovalFindsNoContainer(t *testing.T) {
	te := startEngine(t)
	te.loadBusybox()
	// SIGTERM is ignored: the removal's stop holds the lock for its 2 s.
	id := te.create(map[string]any{"command": []string{"sh", "-c", "trap '' TERM; echo up; while :; do sleep 0.1; done"}, "stop_timeout": 2})
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	te.waitLog(id, 1)
	removed := make(chan int, 1)
	go func() {
		status, _ := te.Do("DELETE", "/containers/"+id+"?force=true", nil)
		removed <- status
	}()
	time.Sleep(500 * time.Millisecond)
	status, body := te.Do("POST", "/containers/"+id+"/start", nil)
	if st := <-removed; st != http.StatusOK {
		t.Fatalf("remove: %d", st)
	}
	if status != http.StatusNotFound {
		t.Fatalf("a start that waited for the removal: %d %s, want 404", status, body)
	}
	te.noLeaks(id)
}

func TestNetworkNamespaces(t *testing.T) {
	te := startEngine(t)
	// flags of lo: 0x9 is IFF_UP|IFF_LOOPBACK. /proc/net/dev lists the interfaces.
	script := "cat /sys/class/net/lo/flags; grep -c : /proc/net/dev; hostname"
	for _, mode := range []string{"none", "private"} {
		code, out := te.run(map[string]any{"command": []string{"sh", "-c", script}, "netns": map[string]string{"nsmode": mode}, "hostname": "box"})
		if code != 0 || len(out) != 3 || out[0] != "0x9" || out[1] != "1" || out[2] != "box" {
			t.Errorf("netns %s: exit %d, output %q (want lo up, one interface, hostname box)", mode, code, out)
		}
	}
	// The host's namespace itself (not a count of its interfaces, which
	// other tests on the host change at any moment).
	hostNS, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	code, out := te.run(map[string]any{"command": []string{"sh", "-c", script + "; readlink /proc/self/ns/net"}, "netns": map[string]string{"nsmode": "host"}})
	if code != 0 || len(out) != 4 || out[0] != "0x9" || out[3] != hostNS {
		t.Errorf("netns host: exit %d, output %q, want lo up and the host's namespace %s", code, out, hostNS)
	}
}

func TestProcessSettings(t *testing.T) {
	te := startEngine(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f"), []byte("from-host\n"), 0o644)
	code, out := te.run(map[string]any{
		"command":  []string{"sh", "-c", "ulimit -n; ulimit -Hn; id -u; id -g; pwd; echo $GREETING; cat /mnt/f; touch /mnt/x 2>/dev/null || echo ro; mount | grep -c ' /scratch type tmpfs'; cat /etc/hostname"},
		"user":     "65534:65534",
		"work_dir": "/work/dir",
		"env":      map[string]string{"GREETING": "hello"},
		"r_limits": []map[string]any{{"type": "nofile", "hard": -1, "soft": -1}},
		"mounts": []map[string]any{
			{"destination": "/mnt", "type": "bind", "source": dir, "options": []string{"ro"}},
			{"destination": "/scratch", "type": "tmpfs", "source": "tmpfs"},
		},
		"hostname": "settings",
	})
	var hard uint64 = 20000
	if data, err := os.ReadFile("/proc/self/limits"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, "Max open files") {
				f := strings.Fields(line)
				hard, _ = strconv.ParseUint(f[4], 10, 64)
			}
		}
	}
	h := strconv.FormatUint(hard, 10)
	want := []string{h, h, "65534", "65534", "/work/dir", "hello", "from-host", "ro", "1", "settings"}
	if code != 0 || !slices.Equal(out, want) {
		t.Fatalf("exit %d, output %q, want %q", code, out, want)
	}
}

func TestAutoRemoveKeepsExitCodeForWait(t *testing.T) {
	te := startEngine(t)
	id := te.create(map[string]any{"command": []string{"sh", "-c", "exit 5"}, "remove": true})
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	if code := te.wait(id); code != 5 {
		t.Fatalf("wait: %d", code)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, _ := te.Do("GET", "/containers/"+id+"/exists", nil)
		if status == http.StatusNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("auto-remove container still exists")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code := te.wait(id); code != 5 {
		t.Fatalf("wait after removal: %d", code)
	}
	te.noLeaks(id)
}

func TestListFiltersAndPrune(t *testing.T) {
	te := startEngine(t)
	a := te.create(map[string]any{"name": "a-one", "command": []string{"sh", "-c", "exit 3"}, "labels": map[string]string{"tier": "db"}})
	time.Sleep(10 * time.Millisecond)
	b := te.create(map[string]any{"name": "b-two", "command": []string{"sleep", "60"}, "labels": map[string]string{"tier": "web"}})
	time.Sleep(10 * time.Millisecond)
	c := te.create(map[string]any{"name": "c-three", "command": []string{"true"}})
	te.Must(http.StatusNoContent, "POST", "/containers/"+a+"/start", nil)
	te.wait(a)
	te.Must(http.StatusNoContent, "POST", "/containers/"+b+"/start", nil)

	list := func(q string) []string {
		var out []struct {
			ID    string `json:"Id"`
			Names []string
			State string
		}
		json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/json"+q, nil), &out)
		var names []string
		for _, c := range out {
			names = append(names, c.Names[0])
		}
		return names
	}
	f := func(filters string) string { return "?all=true&filters=" + filters }
	tests := []struct {
		q    string
		want []string
	}{
		{"", []string{"b-two"}},
		{"?all=true", []string{"c-three", "b-two", "a-one"}},
		{"?limit=1", []string{"c-three"}},
		{f(`{"label":["tier=db"]}`), []string{"a-one"}},
		{f(`{"label":["tier"]}`), []string{"b-two", "a-one"}},
		{f(`{"status":["exited"]}`), []string{"a-one"}},
		{f(`{"status":["created"]}`), []string{"c-three"}},
		{f(`{"exited":["3"]}`), []string{"a-one"}},
		{f(`{"name":["b-two"]}`), []string{"b-two"}},
		{f(`{"id":["` + c[:10] + `"]}`), []string{"c-three"}},
		{f(`{"ancestor":["busybox"]}`), []string{"c-three", "b-two", "a-one"}},
		{f(`{"before":["b-two"]}`), []string{"a-one"}},
		{f(`{"since":["b-two"]}`), []string{"c-three"}},
		// Several values of one filter: any may match (label: all must hold);
		// different filters must all match.
		{f(`{"name":["a-one","c-three"]}`), []string{"c-three", "a-one"}},
		{f(`{"name":["nope","b-two"]}`), []string{"b-two"}},
		{f(`{"id":["` + a[:10] + `","` + c[:10] + `"]}`), []string{"c-three", "a-one"}},
		{f(`{"status":["exited","created"]}`), []string{"c-three", "a-one"}},
		{f(`{"exited":["0","3"]}`), []string{"a-one"}},
		{f(`{"ancestor":["nope","busybox"]}`), []string{"c-three", "b-two", "a-one"}},
		{f(`{"before":["b-two","c-three"]}`), []string{"b-two", "a-one"}},
		{f(`{"since":["a-one","b-two"]}`), []string{"c-three", "b-two"}},
		{f(`{"label":["tier","tier=db"]}`), []string{"a-one"}},
		{f(`{"label!":["tier=db","tier=web"]}`), []string{"c-three"}},
		{f(`{"name":["a-one","b-two"],"status":["running"]}`), []string{"b-two"}},
		{f(`{"name":["a-one","b-two"],"label":["tier=db"]}`), []string{"a-one"}},
	}
	for _, tt := range tests {
		if got := list(tt.q); !slices.Equal(got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.q, got, tt.want)
		}
	}
	te.Must(http.StatusBadRequest, "GET", "/containers/json"+f(`{"status":["sleepy"]}`), nil)
	te.Must(http.StatusBadRequest, "GET", "/containers/json"+f(`{"bogus":["x"]}`), nil)

	var pruned []struct {
		ID string `json:"Id"`
	}
	json.Unmarshal(te.Must(http.StatusOK, "POST", "/containers/prune", nil), &pruned)
	var ids []string
	for _, p := range pruned {
		ids = append(ids, p.ID)
	}
	slices.Sort(ids)
	want := []string{a, c}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("pruned %v, want %v", ids, want)
	}
	if got := list("?all=true"); !slices.Equal(got, []string{"b-two"}) {
		t.Fatalf("after prune: %v", got)
	}
}

func TestUpdateResourcesOfRunningContainer(t *testing.T) {
	te := startEngine(t)
	id := te.create(map[string]any{"command": []string{"sleep", "60"}, "resource_limits": map[string]any{"memory": map[string]any{"limit": 64 << 20}}})
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	cg := te.inspect(id).State.CgroupPath
	read := func() string {
		data, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory", cg, "memory.limit_in_bytes"))
		if err != nil {
			t.Skipf("memory cgroup v1 not available: %v", err)
		}
		return strings.TrimSpace(string(data))
	}
	if got := read(); got != strconv.Itoa(64<<20) {
		t.Fatalf("memory limit at start: %s", got)
	}
	te.Must(http.StatusCreated, "POST", "/containers/"+id+"/update?restartPolicy=on-failure&restartRetries=2", map[string]any{"memory": map[string]any{"limit": 128 << 20}})
	if got := read(); got != strconv.Itoa(128<<20) {
		t.Fatalf("memory limit after update: %s", got)
	}
	if d := te.inspect(id); d.HostConfig.Memory != 128<<20 {
		t.Fatalf("inspect memory after update: %d", d.HostConfig.Memory)
	}
	te.Must(http.StatusBadRequest, "POST", "/containers/"+id+"/update?restartPolicy=sometimes", map[string]any{})
}

// TestStopAfterConmonDied: with its monitor gone no exit file will come;
// stop must still finish and the container be removable.
func TestStopAfterConmonDied(t *testing.T) {
	te := startEngine(t)
	id := te.create(map[string]any{"command": []string{"sleep", "600"}})
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	d := te.inspect(id)
	if err := syscall.Kill(d.State.ConmonPid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/stop?timeout=0", nil)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("stop hung after conmon died")
	}
	if d := te.inspect(id); d.State.Status != "exited" || d.State.Error == "" {
		t.Fatalf("after stop: %+v", d.State)
	}
	te.Must(http.StatusOK, "DELETE", "/containers/"+id, nil)
	te.noLeaks(id)
}

func TestMountUnmountRename(t *testing.T) {
	te := startEngine(t)
	id := te.create(map[string]any{"name": "m1", "command": []string{"sh", "-c", "echo hi > /made-inside"}})
	te.create(map[string]any{"name": "other"})
	var path string
	json.Unmarshal(te.Must(http.StatusOK, "POST", "/containers/m1/mount", nil), &path)
	if _, err := os.Stat(filepath.Join(path, "bin/busybox")); err != nil {
		t.Fatalf("mounted rootfs %q: %v", path, err)
	}
	te.Must(http.StatusNoContent, "POST", "/containers/m1/start", nil)
	te.wait(id)
	// The client's mount outlives the container's exit.
	if data, err := os.ReadFile(filepath.Join(path, "made-inside")); err != nil || string(data) != "hi\n" {
		t.Fatalf("file written by the container: %q %v", data, err)
	}
	if mounted := te.showMounted(); mounted[id] != path {
		t.Fatalf("showmounted %v", mounted)
	}
	te.Must(http.StatusNoContent, "POST", "/containers/m1/unmount", nil)
	mounted := te.showMounted()
	if _, ok := mounted[id]; ok {
		t.Fatalf("still mounted after unmount: %v", mounted)
	}
	te.Must(http.StatusConflict, "POST", "/containers/m1/rename?name=other", nil)
	te.Must(http.StatusBadRequest, "POST", "/containers/m1/rename?name=bad%20name", nil)
	te.Must(http.StatusNoContent, "POST", "/containers/m1/rename?name=m2", nil)
	te.Must(http.StatusNotFound, "GET", "/containers/m1/json", nil)
	if d := te.inspect("m2"); d.ID != id {
		t.Fatalf("renamed container %s", d.ID)
	}
	// The old name is free again.
	te.create(map[string]any{"name": "m1"})
}

func TestExportAndChanges(t *testing.T) {
	te := startEngine(t)
	id := te.create(map[string]any{"command": []string{"sh", "-c", "echo data > /added; rm /bin/yes; echo x >> /etc/passwd"}})
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	te.wait(id)
	var changes []struct {
		Path string
		Kind int
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+id+"/changes", nil), &changes)
	kinds := map[string]int{}
	for _, c := range changes {
		kinds[c.Path] = c.Kind
	}
	if k, ok := kinds["/added"]; !ok || k != 1 {
		t.Errorf("/added: %v", changes)
	}
	if k, ok := kinds["/bin/yes"]; !ok || k != 2 {
		t.Errorf("/bin/yes: %v", changes)
	}
	if k, ok := kinds["/etc/passwd"]; !ok || k != 0 {
		t.Errorf("/etc/passwd: %v", changes)
	}
	tarData := te.Must(http.StatusOK, "GET", "/containers/"+id+"/export", nil)
	tr := tar.NewReader(bytes.NewReader(tarData))
	found := map[string]string{}
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if h.Name == "added" || h.Name == "./added" {
			data, _ := io.ReadAll(tr)
			found["added"] = string(data)
		}
		if strings.TrimPrefix(h.Name, "./") == "bin/yes" {
			found["yes"] = "present"
		}
	}
	if found["added"] != "data\n" || found["yes"] != "" {
		t.Fatalf("export: %v (%d bytes)", found, len(tarData))
	}
	te.Must(http.StatusNotFound, "GET", "/containers/nosuch/export", nil)
	// The export's mount is released again.
	mounted := te.showMounted()
	if _, ok := mounted[id]; ok {
		t.Fatalf("still mounted after export: %v", mounted)
	}
}

func TestContainerMetrics(t *testing.T) {
	te := startEngine(t)
	id := te.create(map[string]any{"command": []string{"sleep", "60"}})
	te.create(map[string]any{"command": []string{"true"}})
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	resp, err := http.Get(strings.TrimSuffix(te.URL, "/v4.3.1/libpod") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`berth_engine_containers{state="running"} 1`,
		`berth_engine_containers{state="created"} 1`,
		`berth_engine_operation_duration_seconds_count{operation="create"} 2`,
		`berth_engine_operation_duration_seconds_count{operation="start"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestListNamespaces: namespace=true (podman ps --ns) fills each running
// container's namespaces with the inode numbers of its process's; without
// it, and for a container that does not run, they stay empty.
func TestListNamespaces(t *testing.T) {
	te := startEngine(t)
	id := te.create(map[string]any{"command": []string{"sleep", "60"}})
	te.create(map[string]any{"name": "ns-created", "command": []string{"true"}})
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	type row struct {
		ID         string `json:"Id"`
		Namespaces map[string]string
	}
	link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", te.inspect(id).State.Pid))
	if err != nil {
		t.Fatal(err)
	}
	var rows []row
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/json?all=true&namespace=true", nil), &rows)
	for _, r := range rows {
		switch {
		case r.ID == id && (link != "net:["+r.Namespaces["Net"]+"]" || r.Namespaces["Mnt"] == "" || r.Namespaces["Pidns"] == "" || len(r.Namespaces) != 7):
			t.Errorf("the running container's namespaces: %v (its net namespace is %s)", r.Namespaces, link)
		case r.ID != id && len(r.Namespaces) != 0:
			t.Errorf("a created container's namespaces: %v", r.Namespaces)
		}
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/json", nil), &rows)
	if len(rows) != 1 || len(rows[0].Namespaces) != 0 {
		t.Errorf("without namespace=true: %+v", rows)
	}
}
