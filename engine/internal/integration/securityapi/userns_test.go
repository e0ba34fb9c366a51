package securityapi

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
)

// idMaps reads a container's HostConfig.IDMappings.UidMap as ranges.
func (te *testEngine) idMaps(name string) [][3]uint64 {
	te.T.Helper()
	var out struct {
		HostConfig struct {
			UsernsMode string
			IDMappings *struct{ UidMap []string }
		}
	}
	te.Get("/containers/"+name+"/json", &out)
	if out.HostConfig.IDMappings == nil {
		return nil
	}
	var maps [][3]uint64
	for _, m := range out.HostConfig.IDMappings.UidMap {
		var r [3]uint64
		for i, f := range strings.Split(m, ":") {
			r[i], _ = strconv.ParseUint(f, 10, 64)
		}
		maps = append(maps, r)
	}
	return maps
}

func overlaps(a, b [][3]uint64) bool {
	for _, x := range a {
		for _, y := range b {
			if x[1] < y[1]+y[2] && y[1] < x[1]+x[2] {
				return true
			}
		}
	}
	return false
}

// TestUserNamespaces: --userns=auto gives each container a range of the
// containers user's subordinate IDs, never overlapping, kept across an
// engine restart and freed once by removal; root in the container is an
// unprivileged host uid (a file it writes into a bind mount is owned by
// it); the image's files and a new volume belong to the container's root;
// --uidmap/--gidmap and --userns=host work; bad requests are 400s naming
// the option with nothing created.
func TestUserNamespaces(t *testing.T) {
	p := enginetest.StartProcess(t, securityOptions())
	te := &testEngine{p.Engine}
	dir := p.Dir
	// The engine's root must be reachable from inside a user namespace.
	reachableFromUserns(dir)
	te.Load(busybox)

	bind := filepath.Join(dir, "bind")
	os.Mkdir(bind, 0o777)
	os.Chmod(bind, 0o777)
	out := te.MustPodman("run", "--rm", "--userns=auto", "-v", bind+":/b", "-v", "userns-vol:/v", "localhost/busybox",
		"sh", "-c", "cat /proc/self/uid_map; id -u; touch /b/f /v/f; stat -c '%u:%g' / /bin/busybox /etc/hosts /v /v/f")
	f := strings.Fields(out)
	if len(f) < 9 || f[0] != "0" || f[1] == "0" || f[3] != "0" {
		t.Fatalf("--userns=auto: uid_map and id: %q", out)
	}
	for i, what := range []string{"/", "/bin/busybox", "/etc/hosts", "the new volume", "a file in it"} {
		if f[4+i] != "0:0" {
			t.Errorf("--userns=auto: %s is owned by %s inside, want 0:0 (the container's root)", what, f[4+i])
		}
	}
	fi, err := os.Stat(filepath.Join(bind, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; strconv.FormatUint(uint64(uid), 10) != f[1] || uid == 0 {
		t.Errorf("file written by the container's root into a bind mount: host owner %d, want the mapped uid %s", uid, f[1])
	}

	te.MustPodman("create", "--name", "auto-a", "--userns=auto:size=2000", "localhost/busybox", "true")
	te.MustPodman("create", "--name", "auto-b", "--userns=auto", "localhost/busybox", "true")
	a, b := te.idMaps("auto-a"), te.idMaps("auto-b")
	if len(a) != 1 || a[0][2] != 2000 || len(b) == 0 || overlaps(a, b) {
		t.Fatalf("two auto containers: %v and %v (size 2000, no overlap wanted)", a, b)
	}
	if mode := te.inspect("auto-a")["HostConfig"].(map[string]any)["UsernsMode"]; mode != "auto" {
		t.Errorf("UsernsMode %v, want auto", mode)
	}

	// A restart keeps the ranges taken; a removal frees its range once.
	p.Stop()
	p.Start()
	te.MustPodman("create", "--name", "auto-c", "--userns=auto:size=2000", "localhost/busybox", "true")
	c := te.idMaps("auto-c")
	if overlaps(c, a) || overlaps(c, b) {
		t.Fatalf("after a restart: %v overlaps %v or %v", c, a, b)
	}
	te.MustPodman("rm", "auto-a")
	te.MustPodman("create", "--name", "auto-d", "--userns=auto:size=2000", "localhost/busybox", "true")
	te.MustPodman("create", "--name", "auto-e", "--userns=auto:size=2000", "localhost/busybox", "true")
	d, e := te.idMaps("auto-d"), te.idMaps("auto-e")
	if overlaps(d, e) || overlaps(d, b) || overlaps(d, c) || overlaps(e, b) || overlaps(e, c) {
		t.Fatalf("after a removal: %v and %v overlap each other or %v, %v", d, e, b, c)
	}
	if out := te.MustPodman("start", "--attach", "auto-d"); out != "" {
		t.Errorf("start auto-d: %s", out)
	}

	// Explicit maps within the ranges, and the host's user namespace.
	free := e[0][1] + e[0][2] + 100000
	m := strconv.FormatUint(free, 10)
	out = te.MustPodman("run", "--rm", "--uidmap", "0:"+m+":3000", "--gidmap", "0:"+m+":3000", "localhost/busybox", "cat", "/proc/self/uid_map")
	if f := strings.Fields(out); len(f) != 3 || f[1] != m || f[2] != "3000" {
		t.Errorf("--uidmap 0:%s:3000: uid_map %q", m, out)
	}
	if out := te.MustPodman("run", "--rm", "--userns=host", "localhost/busybox", "cat", "/proc/self/uid_map"); !strings.Contains(out, "4294967295") {
		t.Errorf("--userns=host: uid_map %q, want the whole range", out)
	}

	before := te.ContainerCount()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--uidmap", "0:1000:100", "--gidmap", "0:1000:100"}, "uidmap"},
		{[]string{"--uidmap", "0:" + strconv.FormatUint(b[0][1], 10) + ":10", "--gidmap", "0:" + m + ":10"}, "uidmap"},
		{[]string{"--uidmap", "0:" + m + ":10", "--gidmap", "0:4294967290:100"}, "gidmap"},
		{[]string{"--userns=auto:size=4294967295"}, "userns"},
		{[]string{"--userns=auto:uidmapping=0:1:1"}, "userns"},
	} {
		out, err := te.Podman(append(append([]string{"create"}, tc.args...), "localhost/busybox", "true")...)
		if err == nil || !strings.Contains(out, "invalid "+tc.want) {
			t.Errorf("create %v: %v, want a 400 naming %s\n%s", tc.args, err, tc.want, out)
		}
	}
	if n := te.ContainerCount(); n != before {
		t.Errorf("%d containers after refused creates, want %d", n, before)
	}
}
