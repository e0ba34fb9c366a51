package hostsuite

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/testsupport/poll"
)

// TestInfoReportsTheCgroupHierarchy: info names the host's cgroup version
// and the controllers containers can use.
func TestInfoReportsTheCgroupHierarchy(t *testing.T) {
	l := startLab(t)
	var info struct {
		Host struct {
			CgroupVersion     string   `json:"cgroupVersion"`
			CgroupControllers []string `json:"cgroupControllers"`
			CgroupManager     string   `json:"cgroupManager"`
		} `json:"host"`
	}
	l.Get("/info", &info)
	if want := pick("v1", "v2"); info.Host.CgroupVersion != want {
		t.Fatalf("cgroupVersion %q, want %q", info.Host.CgroupVersion, want)
	}
	for _, c := range []string{"memory", "pids", "cpu", "cpuset"} {
		if !slices.Contains(info.Host.CgroupControllers, c) {
			t.Fatalf("cgroupControllers %v lack %s", info.Host.CgroupControllers, c)
		}
	}
	if info.Host.CgroupManager != defaultManager() {
		t.Fatalf("cgroupManager %q", info.Host.CgroupManager)
	}
}

// TestStatsReadTheContainersCgroup: CPU, memory against the container's
// limit, PIDs and (on v2) the bytes written to disk come from the
// container's own cgroup.
func TestStatsReadTheContainersCgroup(t *testing.T) {
	l := startLab(t)
	// The write goes to a directory on a disk, bound into the container:
	// the engine's root is under /tmp, which Debian 13 mounts as a tmpfs,
	// and writes to a tmpfs are no block I/O (io.stat rightly shows none).
	disk := diskDir(t)
	id := l.Run(map[string]any{
		"command": []string{"sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; " +
			"dd if=/dev/zero of=/disk/big bs=1M count=8 oflag=direct 2>/dd.err; touch /written; sleep 600 & sleep 600"},
		"resource_limits": map[string]any{"memory": map[string]any{"limit": 96 << 20}},
		"mounts":          []map[string]any{{"destination": "/disk", "source": disk, "type": "bind"}},
	})
	poll.Until(t, 60*time.Second, "the container's busy loop and write", func() bool {
		_, err := os.Stat(l.rootfsFile(id, "written"))
		return err == nil
	})
	var s containerStats
	poll.Until(t, 10*time.Second, "both sleeps counted", func() bool {
		s = l.stats(id)
		return s.PIDs == 2
	})
	if s.CPUNano == 0 {
		t.Errorf("CPUNano is 0 after a busy loop")
	}
	if s.MemUsage == 0 || s.MemUsage > 96<<20 {
		t.Errorf("MemUsage %d", s.MemUsage)
	}
	if s.MemLimit != 96<<20 {
		t.Errorf("MemLimit %d, want %d", s.MemLimit, 96<<20)
	}
	// On v1 the counters are blkio.throttle.*, which these machines' kernel
	// leaves at 0 for a cgroup without throttle rules (seen: "Total 0" after
	// 8 MiB of O_DIRECT writes); v2's io.stat counts every write.
	if unified() && s.BlockOutput < 8<<20 {
		ddErr, _ := os.ReadFile(l.rootfsFile(id, "dd.err"))
		t.Errorf("BlockOutput %d after writing 8 MiB with O_DIRECT (dd: %s)", s.BlockOutput, ddErr)
	}
	// Restarted, the container's cgroup is made anew at the same path: the
	// control files the engine held open for the first run read ENODEV and
	// are opened again.
	l.Must(http.StatusNoContent, "POST", "/containers/"+id+"/stop?timeout=0", nil)
	l.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	poll.Until(t, 30*time.Second, "the restarted container's sleeps counted", func() bool {
		s = l.stats(id)
		return s.PIDs == 2
	})
	if s.MemLimit != 96<<20 {
		t.Errorf("after a restart: MemLimit %d, want %d", s.MemLimit, 96<<20)
	}
}

// diskDir is a new directory on a block device's filesystem (/var/tmp, not
// /tmp: a tmpfs on Debian 13 and other systemd hosts), removed at the end.
func diskDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "berth-disk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type == 0x01021994 { // TMPFS_MAGIC
		t.Fatalf("%s is on a tmpfs: no block device to count writes to", dir)
	}
	return dir
}

// rootfsFile is a file in a running container's root filesystem, seen
// from the host through /proc/PID/root.
func (l *lab) rootfsFile(id, name string) string {
	return "/proc/" + strconv.Itoa(l.inspect(id).State.Pid) + "/root/" + name
}

// TestTopListsTheContainersProcesses: top reads the container's processes
// from its cgroup.
func TestTopListsTheContainersProcesses(t *testing.T) {
	l := startLab(t)
	id := l.Run(map[string]any{"command": []string{"sh", "-c", "sleep 700 & sleep 800"}})
	var top struct {
		Titles    []string
		Processes [][]string
	}
	poll.Until(t, 10*time.Second, "both sleeps in top", func() bool {
		l.Get("/containers/"+id+"/top?ps_args=pid,args", &top)
		var seen int
		for _, p := range top.Processes {
			if strings.Contains(strings.Join(p, " "), "sleep 700") || strings.Contains(strings.Join(p, " "), "sleep 800") {
				seen++
			}
		}
		return seen == 2
	})
	if len(top.Processes) != 2 {
		t.Fatalf("top: %v", top.Processes)
	}
	// The Docker API's top runs ps on the host, as dockerd's: the same two
	// processes, by their host PIDs, with ps -ef's columns.
	code, _, body := l.Exchange("GET", l.Base()+"/v1.44/containers/"+id+"/top", "", nil)
	if code != http.StatusOK {
		t.Fatalf("docker top: %d %s", code, body)
	}
	var dtop struct {
		Titles    []string
		Processes [][]string
	}
	l.Decode(body, &dtop)
	pidCol := slices.Index(dtop.Titles, "PID")
	if pidCol < 0 || !slices.Contains(dtop.Titles, "CMD") || len(dtop.Processes) != 2 {
		t.Fatalf("docker top: %s", body)
	}
	for _, p := range dtop.Processes {
		cmdline, err := os.ReadFile("/proc/" + p[pidCol] + "/cmdline")
		if err != nil || !strings.HasPrefix(string(cmdline), "sleep\x00") {
			t.Fatalf("docker top lists %v, whose host PID %s is not a sleep: %q %v", p, p[pidCol], cmdline, err)
		}
	}
}

// TestUpdateChangesTheCgroup: update writes memory, CPU quota and shares
// (weight on v2), cpuset, pids and a device's read throttle into the
// running container's cgroup, and inspect shows them.
func TestUpdateChangesTheCgroup(t *testing.T) {
	l := startLab(t)
	id := l.Run(map[string]any{"command": []string{"sleep", "600"},
		"resource_limits": map[string]any{"memory": map[string]any{"limit": 64 << 20}}})
	cg := l.inspect(id).State.CgroupPath
	if got := readCgroup(t, cg, "memory", "memory.limit_in_bytes", "memory.max"); got != strconv.Itoa(64<<20) {
		t.Fatalf("memory limit at start: %s", got)
	}
	major, minor := blockDevice(t)
	l.Must(http.StatusCreated, "POST", "/containers/"+id+"/update", map[string]any{
		"memory":  map[string]any{"limit": 128 << 20},
		"cpu":     map[string]any{"quota": 50000, "period": 100000, "shares": 512, "cpus": "0"},
		"pids":    map[string]any{"limit": 40},
		"blockIO": map[string]any{"throttleReadBpsDevice": []map[string]any{{"major": major, "minor": minor, "rate": 1 << 20}}},
	})
	checks := []struct{ controller, v1, v2, want string }{
		{"memory", "memory.limit_in_bytes", "memory.max", strconv.Itoa(128 << 20)},
		{"cpu", "cpu.cfs_quota_us", "cpu.max", pick("50000", "50000 100000")},
		{"cpu", "cpu.shares", "cpu.weight", pick("512", "20")},
		{"cpuset", "cpuset.cpus", "cpuset.cpus", "0"},
		{"pids", "pids.max", "pids.max", "40"},
	}
	for _, c := range checks {
		if got := readCgroup(t, cg, c.controller, c.v1, c.v2); got != c.want {
			t.Errorf("%s after update: %q, want %q", pick(c.v1, c.v2), got, c.want)
		}
	}
	dev := strconv.Itoa(major) + ":" + strconv.Itoa(minor)
	throttle := readCgroup(t, cg, "blkio", "blkio.throttle.read_bps_device", "io.max")
	if want := pick(dev+" 1048576", dev+" rbps=1048576 wbps=max riops=max wiops=max"); !strings.Contains(throttle, want) {
		t.Errorf("device throttle after update: %q, want %q", throttle, want)
	}
	d := l.inspect(id)
	if d.HostConfig.Memory != 128<<20 || d.HostConfig.PidsLimit != 40 || d.HostConfig.CpuQuota != 50000 || d.HostConfig.CpusetCpus != "0" {
		t.Errorf("inspect after update: %+v", d.HostConfig)
	}
}

// blockDevice is the major and minor number of a disk of the host.
func blockDevice(t *testing.T) (int, int) {
	t.Helper()
	_, major, minor := blockDeviceNode(t)
	return major, minor
}

// blockDeviceNode is a disk of the host: its device node and its numbers.
func blockDeviceNode(t *testing.T) (string, int, int) {
	t.Helper()
	entries, _ := os.ReadDir("/sys/block")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "loop") || strings.HasPrefix(e.Name(), "ram") || strings.HasPrefix(e.Name(), "nbd") {
			continue
		}
		data, err := os.ReadFile("/sys/block/" + e.Name() + "/dev")
		if err != nil {
			continue
		}
		maj, min, ok := strings.Cut(strings.TrimSpace(string(data)), ":")
		a, err1 := strconv.Atoi(maj)
		b, err2 := strconv.Atoi(min)
		if _, err := os.Stat("/dev/" + e.Name()); ok && err1 == nil && err2 == nil && err == nil {
			return "/dev/" + e.Name(), a, b
		}
	}
	t.Fatal("no disk in /sys/block with a node in /dev")
	return "", 0, 0
}

// TestCreateThrottlesAndHostNamespaces: a per-device throttle given by
// path at create (podman's --device-read-bps) reaches the container's
// cgroup by device number (blkio.throttle on v1, io.max on v2), and ipcns
// and utsns host put its process in the host's IPC and UTS namespaces.
func TestCreateThrottlesAndHostNamespaces(t *testing.T) {
	l := startLab(t)
	path, major, minor := blockDeviceNode(t)
	id := l.Run(map[string]any{"command": []string{"sleep", "600"},
		"throttleReadBpsDevice": map[string]any{path: map[string]any{"rate": 1 << 20}},
		"ipcns":                 map[string]any{"nsmode": "host"},
		"utsns":                 map[string]any{"nsmode": "host"}})
	d := l.inspect(id)
	dev := strconv.Itoa(major) + ":" + strconv.Itoa(minor)
	throttle := readCgroup(t, d.State.CgroupPath, "blkio", "blkio.throttle.read_bps_device", "io.max")
	if want := pick(dev+" 1048576", dev+" rbps=1048576"); !strings.Contains(throttle, want) {
		t.Errorf("throttle of %s at create: %q, want %q", path, throttle, want)
	}
	for _, ns := range []string{"ipc", "uts"} {
		host, _ := os.Readlink("/proc/self/ns/" + ns)
		ctr, err := os.Readlink("/proc/" + strconv.Itoa(d.State.Pid) + "/ns/" + ns)
		if err != nil || ctr != host {
			t.Errorf("the container's %s namespace %q (%v), want the host's %q", ns, ctr, err, host)
		}
	}
}

// TestPauseFreezesTheCgroup: pause freezes the container's cgroup (the
// freezer on v1, cgroup.freeze on v2) and unpause thaws it.
func TestPauseFreezesTheCgroup(t *testing.T) {
	l := startLab(t)
	id := l.Run(map[string]any{"command": []string{"sleep", "600"}})
	cg := l.inspect(id).State.CgroupPath
	frozen := func() bool {
		if unified() {
			data, _ := os.ReadFile("/sys/fs/cgroup" + cg + "/cgroup.events")
			return strings.Contains(string(data), "frozen 1")
		}
		data, _ := os.ReadFile("/sys/fs/cgroup/freezer" + cg + "/freezer.state")
		return strings.TrimSpace(string(data)) == "FROZEN"
	}
	l.Must(http.StatusNoContent, "POST", "/containers/"+id+"/pause", nil)
	if d := l.inspect(id); !d.State.Paused || !frozen() {
		t.Fatalf("after pause: paused %v, frozen %v", d.State.Paused, frozen())
	}
	l.Must(http.StatusNoContent, "POST", "/containers/"+id+"/unpause", nil)
	if d := l.inspect(id); d.State.Paused || frozen() {
		t.Fatalf("after unpause: paused %v, frozen %v", d.State.Paused, frozen())
	}
}

// TestCgroupNamespaces: by default a container on the unified hierarchy
// has a cgroup namespace of its own (its /proc/self/cgroup reads "0::/"),
// on v1 the host's; --cgroupns host, private and container:ID do what they
// say, and a bad mode is a 400 naming cgroupns that creates nothing.
func TestCgroupNamespaces(t *testing.T) {
	l := startLab(t)
	// The containers note their own /proc/self/cgroup in /cg.
	selfCgroup := func(id string) string {
		var data []byte
		poll.Until(t, 10*time.Second, "/cg written", func() bool {
			data, _ = os.ReadFile(l.rootfsFile(id, "cg"))
			return len(data) > 0
		})
		return string(data)
	}
	sleeper := []string{"sh", "-c", "cat /proc/self/cgroup >/cg; exec sleep 600"}
	nsOf := func(id string) string {
		link, err := os.Readlink("/proc/" + strconv.Itoa(l.inspect(id).State.Pid) + "/ns/cgroup")
		if err != nil {
			t.Fatal(err)
		}
		return link
	}
	hostNS, _ := os.Readlink("/proc/self/ns/cgroup")

	def := l.Run(map[string]any{"command": []string{"sleep", "600"}})
	priv := l.Run(map[string]any{"command": sleeper, "cgroupns": map[string]string{"nsmode": "private"}})
	host := l.Run(map[string]any{"command": []string{"sleep", "600"}, "cgroupns": map[string]string{"nsmode": "host"}})
	joined := l.Run(map[string]any{"command": []string{"sleep", "600"}, "cgroupns": map[string]string{"nsmode": "container", "value": priv}})

	if got := l.inspect(def).HostConfig.CgroupnsMode; got != pick("host", "private") {
		t.Errorf("default CgroupnsMode %q", got)
	}
	if (nsOf(def) == hostNS) == unified() {
		t.Errorf("default cgroup namespace %s (host's %s) on %s", nsOf(def), hostNS, pick("v1", "v2"))
	}
	if nsOf(priv) == hostNS || nsOf(host) != hostNS || nsOf(joined) != nsOf(priv) {
		t.Errorf("namespaces: private %s, host %s, joined %s, host's %s", nsOf(priv), nsOf(host), nsOf(joined), hostNS)
	}
	if unified() {
		if got := selfCgroup(priv); strings.TrimSpace(got) != "0::/" {
			t.Errorf("/proc/self/cgroup in a private namespace: %q", got)
		}
	}
	if got := l.inspect(joined).HostConfig.CgroupnsMode; got != "container:"+priv {
		t.Errorf("joined CgroupnsMode %q", got)
	}
	// The refused name is not hex: a lookup also matches ID prefixes, and
	// a name like "bad" can begin a random ID in the shared engine.
	for _, bad := range []map[string]string{{"nsmode": "bogus"}, {"nsmode": "container", "value": "nosuch"}, {"nsmode": "path", "value": "relative"}} {
		status, body := l.Do("POST", "/containers/create", map[string]any{"image": "localhost/busybox:latest", "name": "refused-cgroupns", "cgroupns": bad})
		if status != http.StatusBadRequest || !strings.Contains(string(body), "cgroupns") {
			t.Errorf("cgroupns %v: %d %s", bad, status, body)
		}
	}
	if status, _ := l.Do("GET", "/containers/refused-cgroupns/json", nil); status != http.StatusNotFound {
		t.Errorf("a refused create left a container behind (%d)", status)
	}
}

// TestHealthcheckRunsInTheContainer: a healthcheck runs in the container
// (an exec the runtime places in its cgroup): failing while a file is
// missing, passing once the container made it.
func TestHealthcheckRunsInTheContainer(t *testing.T) {
	l := startLab(t)
	l.Run(map[string]any{"name": "checked", "command": []string{"sh", "-c", "sleep 2; touch /tmp/ok; exec sleep 600"},
		"healthconfig": map[string]any{"Test": []string{"CMD-SHELL", "test -f /tmp/ok"}, "Interval": int64(time.Hour), "Retries": 1, "Timeout": int64(20 * time.Second)},
	})
	var res struct{ Status string }
	l.Get("/containers/checked/healthcheck", &res)
	if res.Status != "unhealthy" && res.Status != "healthy" {
		t.Fatalf("first check: %+v", res)
	}
	poll.Until(t, 30*time.Second, "a passing check", func() bool {
		l.Get("/containers/checked/healthcheck", &res)
		return res.Status == "healthy"
	})
}

// TestHealthLogDestinations: Podman 5's healthcheck log members, as its
// client sends them with every create: the bounds of the results kept
// (count and output size), a directory destination (DIR/ID-healthcheck.log,
// removed with the container) and events_logger (the newest result in each
// health_status event); a destination that is not local, events_logger or
// an existing absolute directory is a 400 naming it, with nothing created.
func TestHealthLogDestinations(t *testing.T) {
	l := startLab(t)
	dir := t.TempDir()
	check := map[string]any{"Test": []string{"CMD-SHELL", "echo abcdefgh"}, "Interval": int64(time.Hour), "Timeout": int64(20 * time.Second)}
	id := l.Run(map[string]any{"name": "hlog-dir", "command": []string{"sleep", "600"}, "healthconfig": check,
		"healthLogDestination": dir, "healthMaxLogCount": 2, "healthMaxLogSize": 3})
	for i := 0; i < 3; i++ {
		l.Must(http.StatusOK, "GET", "/containers/hlog-dir/healthcheck", nil)
	}
	var inspected struct {
		State  struct{ Health core.HealthCheckResults }
		Config struct {
			HealthLogDestination string
			HealthMaxLogCount    uint `json:"HealthcheckMaxLogCount"`
			HealthMaxLogSize     uint `json:"HealthcheckMaxLogSize"`
		}
	}
	l.Get("/containers/hlog-dir/json", &inspected)
	if c := inspected.Config; c.HealthLogDestination != dir || c.HealthMaxLogCount != 2 || c.HealthMaxLogSize != 3 {
		t.Errorf("inspect Config: %+v", c)
	}
	h := inspected.State.Health
	if h.Status != "healthy" || len(h.Log) != 2 || h.Log[1].Output != "abc" {
		t.Errorf("State.Health: %+v", h)
	}
	file := filepath.Join(dir, id+"-healthcheck.log")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var written core.HealthCheckResults
	l.Decode(data, &written)
	if written.Status != "healthy" || len(written.Log) != 2 || written.Log[0].Output != "abc" {
		t.Errorf("%s: %s", file, data)
	}

	l.Run(map[string]any{"name": "hlog-events", "command": []string{"sleep", "600"}, "healthconfig": check,
		"healthLogDestination": "events_logger", "healthMaxLogCount": 0, "healthMaxLogSize": 0})
	l.Must(http.StatusOK, "GET", "/containers/hlog-events/healthcheck", nil)
	_, body := l.Do("GET", `/events?stream=false&filters={"container":["hlog-events"],"event":["health_status"]}`, nil)
	var ev struct{ HealthStatus, HealthLog string }
	l.Decode(bytes.TrimSpace(body), &ev)
	var last core.HealthCheckLog
	l.Decode([]byte(ev.HealthLog), &last)
	if ev.HealthStatus != "healthy" || last.Output != "abcdefgh" {
		t.Errorf("health_status event: %s", body)
	}

	file2 := filepath.Join(dir, "file")
	if err := os.WriteFile(file2, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"relative/dir", filepath.Join(dir, "missing"), file2} {
		status, body := l.Do("POST", "/containers/create", map[string]any{"image": "localhost/busybox:latest", "name": "hlog-bad", "healthLogDestination": bad})
		if status != http.StatusBadRequest || !strings.Contains(string(body), "healthLogDestination") {
			t.Errorf("healthLogDestination %q: %d %s", bad, status, body)
		}
	}
	if status, _ := l.Do("GET", "/containers/hlog-bad/json", nil); status != http.StatusNotFound {
		t.Errorf("a refused create left a container behind (%d)", status)
	}

	l.Must(http.StatusOK, "DELETE", "/containers/hlog-dir?force=true&timeout=0", nil)
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("%s after the container's removal: %v", file, err)
	}
}

// TestJoinedNamespacesAndSharedMemory: a container made with ipcns, pidns
// and utsns container:NAME shares NAME's IPC, PID and UTS namespaces and
// its /dev/shm (a tmpfs the engine mounts on the host side), under either
// cgroup manager; removal unmounts that tmpfs. A numeric user the image
// lacks gets an /etc/passwd entry.
func TestJoinedNamespacesAndSharedMemory(t *testing.T) {
	l := startLab(t)
	donor := l.Run(map[string]any{"command": []string{"sh", "-c", "echo shared > /dev/shm/seg; exec sleep 600"}})
	join := map[string]string{"nsmode": "container", "value": donor}
	joiner := l.Run(map[string]any{"ipcns": join, "pidns": join, "utsns": join, "user": "1234",
		"command": []string{"sh", "-c", "whoami > /tmp/me; exec sleep 600"}})
	poll.Until(t, 10*time.Second, "the donor's /dev/shm file seen by the joiner", func() bool {
		data, _ := os.ReadFile(l.rootfsFile(joiner, "dev/shm/seg"))
		return string(data) == "shared\n"
	})
	dp, jp := strconv.Itoa(l.inspect(donor).State.Pid), strconv.Itoa(l.inspect(joiner).State.Pid)
	for _, ns := range []string{"ipc", "pid", "uts"} {
		d, _ := os.Readlink("/proc/" + dp + "/ns/" + ns)
		j, err := os.Readlink("/proc/" + jp + "/ns/" + ns)
		if err != nil || d != j {
			t.Errorf("%s namespace: joiner %q (%v), donor %q", ns, j, err, d)
		}
	}
	poll.Until(t, 10*time.Second, "the joiner's whoami", func() bool {
		data, _ := os.ReadFile(l.rootfsFile(joiner, "tmp/me"))
		return string(data) == "1234\n"
	})
	shmMounted := func() bool {
		data, _ := os.ReadFile("/proc/self/mountinfo")
		return strings.Contains(string(data), donor+"/userdata/shm ")
	}
	if !shmMounted() {
		t.Error("the donor's /dev/shm is not mounted on the host side")
	}
	for _, id := range []string{joiner, donor} {
		l.Must(http.StatusOK, "DELETE", "/containers/"+id+"?force=true&timeout=0", nil)
	}
	poll.Until(t, 10*time.Second, "the donor's /dev/shm unmounted after its removal", func() bool { return !shmMounted() })
}
