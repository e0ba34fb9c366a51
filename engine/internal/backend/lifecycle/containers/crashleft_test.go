package containers_test

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-project/berth/engine/internal/backend/platform/mounts"
	"github.com/berth-project/berth/engine/internal/backend/platform/state"
	"github.com/berth-project/berth/engine/internal/engine"
	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
	"github.com/berth-project/berth/shared/syncbuf"
)

// crashSite is an engine's state in a directory that outlives the engine,
// for tests that stop it, leave behind what a crash would, and start it
// again on the same state.
type crashSite struct {
	t   *testing.T
	dir string
	cfg engine.Config
	// logger, where set, receives the log of the engines serve starts.
	logger *slog.Logger
}

func newCrashSite(t *testing.T) *crashSite {
	t.Helper()
	testdeadline.Set(t, testdeadline.Default)
	requireRuntime(t)
	dir := t.TempDir()
	nets := enginetest.UniqueNetworks(t)
	nets.DefaultMode = "private"
	t.Cleanup(func() { unmountUnder(dir) })
	return &crashSite{t: t, dir: dir, cfg: engine.Config{
		Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, "run"), Runtime: "runc", Network: nets,
	}}
}

// serve starts an engine on the site's state; stop stops it (containers
// keep running, as after a crash).
func (s *crashSite) serve() (te *testEngine, stop func()) {
	s.t.Helper()
	addr, stop := enginetest.ServeConfig(s.t, s.logger, s.cfg)
	e := enginetest.Attach(s.t, addr)
	e.Root, e.RunRoot = s.cfg.Root, s.cfg.RunRoot
	return &testEngine{e}, stop
}

// overlayHome starts and stops an engine on the site once, so that its
// store exists, and returns the overlay driver's home; the test is skipped
// where the store does not use overlay.
func (s *crashSite) overlayHome() string {
	s.t.Helper()
	_, stop := s.serve()
	stop()
	overlay := filepath.Join(s.cfg.Root, "storage", "overlay")
	if _, err := os.Stat(overlay); err != nil {
		s.t.Skip("the store does not use overlay here")
	}
	return overlay
}

// mountsUnderRoot lists what is mounted under the engine's root.
func (s *crashSite) mountsUnderRoot() []string {
	s.t.Helper()
	mps, err := mounts.Under(s.cfg.Root, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	return mps
}

// mountTmpfs mounts a small tmpfs with a file in it at dir, standing in for
// a mount a crash left there.
func mountTmpfs(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestStartRemovesMountedStaleTempDir: a deletion cut short left a mount in
// one of the store's staged-deletion directories while no engine ran. The
// next engine starts (it used to fail its store check, "error removing stale
// temp dir"), the directory and its mount are gone, and a stopped engine
// leaves nothing mounted under its root.
func TestStartRemovesMountedStaleTempDir(t *testing.T) {
	site := newCrashSite(t)
	overlay := site.overlayHome()
	tempDir := filepath.Join(overlay, "tempdirs", "temp-dir-4242")
	mountTmpfs(t, filepath.Join(tempDir, "0-c0ffee", "merged"))
	if err := os.WriteFile(filepath.Join(overlay, "tempdirs", "lock-4242"), nil, 0o600); err != nil {
		t.Fatal(err)
	}

	_, stop := site.serve()
	if _, err := os.Stat(tempDir); !os.IsNotExist(err) {
		t.Errorf("the stale temp dir after the start: %v", err)
	}
	stop()
	if l := site.mountsUnderRoot(); len(l) > 0 {
		t.Fatalf("mounted under the root after the engine stopped:\n%s", strings.Join(l, "\n"))
	}
}

// TestRemoveUnmountsRootfsTheStoreDidNotCount: a kill -9 between the
// overlay mount of a container's rootfs and the store's record of it leaves
// a mount the store does not count (a tmpfs at the rootfs stands in for it
// here). Removing the container unmounts it before the layer is deleted:
// nothing stays mounted, and the next engine starts.
func TestRemoveUnmountsRootfsTheStoreDidNotCount(t *testing.T) {
	site := newCrashSite(t)
	te, stop := site.serve()
	te.loadBusybox()
	id := te.create(map[string]any{"command": []string{"true"}})
	rootfs := te.inspect(id).Rootfs
	if !strings.HasSuffix(rootfs, "/merged") {
		t.Skipf("rootfs %q is not an overlay mount", rootfs)
	}
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	te.wait(id)
	for deadline := time.Now().Add(10 * time.Second); mounts.IsMountPoint(rootfs); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the exited container's rootfs stayed mounted")
		}
	}
	stop()
	// As a killed engine leaves it: the driver's home bind-mounted over
	// itself (the next engine keeps that mount), the rootfs mounted on it.
	home := filepath.Dir(filepath.Dir(rootfs))
	if err := unix.Mount(home, home, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	mountTmpfs(t, rootfs)

	te, stop = site.serve()
	te.Must(http.StatusOK, "DELETE", "/containers/"+id, nil)
	// The layer goes in the background, through a staged-deletion
	// directory that must not stay behind.
	layerDir := filepath.Dir(rootfs)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		staged, _ := filepath.Glob(filepath.Join(home, "tempdirs", "temp-dir-*"))
		if _, err := os.Stat(layerDir); os.IsNotExist(err) && len(staged) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the removed container's layer is still on its way out: staged %v, mounted under the root:\n%s", staged, strings.Join(site.mountsUnderRoot(), "\n"))
		}
	}
	stop()
	if l := site.mountsUnderRoot(); len(l) > 0 {
		t.Fatalf("mounted under the root after the removal:\n%s", strings.Join(l, "\n"))
	}
	_, stop = site.serve()
	stop()
}

// TestFailedStartLeavesNothingMounted: a store the engine cannot open (a
// staged deletion it cannot remove: an immutable file in it) fails the
// start, and the failed start leaves no mount behind (the overlay driver's
// home used to stay bind-mounted over itself).
func TestFailedStartLeavesNothingMounted(t *testing.T) {
	site := newCrashSite(t)
	overlay := site.overlayHome()
	stuck := filepath.Join(overlay, "tempdirs", "temp-dir-77", "0-stuck")
	if err := os.MkdirAll(stuck, 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(stuck, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chattr", "+i", file).CombinedOutput(); err != nil {
		t.Skipf("chattr +i: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", file).Run() })

	eng, err := engine.New(context.Background(), nil, site.cfg)
	if err == nil {
		eng.Close()
		t.Fatal("the engine started on a store it cannot repair")
	}
	if l := site.mountsUnderRoot(); len(l) > 0 {
		t.Fatalf("mounted under the root after a failed start (%v):\n%s", err, strings.Join(l, "\n"))
	}
}

// TestTeardownAfterInterfaceGoneRemovesBridges: a kill -9 during the
// removal of a container live-connected to a second network can leave the
// container's interface on that network gone while the network's bridge
// and rules stay (netavark dies with the engine). The restarted engine's
// teardown then fails on that interface ("failed to delete container veth
// eth1: No such device"), and netavark, which removes a bridge only with
// its last interface, used to leave the bridge and the rules for good. Now
// each network's bridge and rules go once no container is on it; and a
// network's removal removes a bridge left without ports whatever the
// container teardowns reached.
func TestTeardownAfterInterfaceGoneRemovesBridges(t *testing.T) {
	site := newCrashSite(t)
	te, stop := site.serve()
	te.loadBusybox()
	type netInfo struct {
		Interface string `json:"network_interface"`
		Subnets   []struct {
			Subnet string `json:"subnet"`
		} `json:"subnets"`
	}
	nets := map[string]netInfo{}
	for _, name := range []string{"first", "second"} {
		te.Must(http.StatusOK, "POST", "/networks/create", map[string]any{"name": name})
		var n netInfo
		if err := json.Unmarshal(te.Must(http.StatusOK, "GET", "/networks/"+name+"/json", nil), &n); err != nil || n.Interface == "" || len(n.Subnets) == 0 {
			t.Fatalf("network %s: %+v %v", name, n, err)
		}
		nets[name] = n
	}
	// Should the test fail, what it leaked goes: the bridges, the rules
	// that name the subnets, the chains they jump to.
	t.Cleanup(func() {
		for _, n := range nets {
			exec.Command("ip", "link", "del", n.Interface).Run()
			removeRulesNaming(n.Subnets[0].Subnet)
		}
	})
	id := te.create(map[string]any{"command": []string{"sleep", "300"},
		"netns": map[string]string{"nsmode": "bridge"}, "Networks": map[string]any{"first": map[string]any{}}})
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	te.Must(http.StatusOK, "POST", "/networks/second/connect", map[string]any{"container": id})
	var d struct{ NetworkSettings struct{ SandboxKey string } }
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+id+"/json", nil), &d)
	if out, err := exec.Command("nsenter", "--net="+d.NetworkSettings.SandboxKey, "ip", "link", "del", "eth1").CombinedOutput(); err != nil {
		t.Fatalf("delete eth1: %v %s", err, out)
	}
	stop()

	te, stop = site.serve()
	defer stop()
	te.Must(http.StatusOK, "DELETE", "/containers/"+id+"?force=true&timeout=0", nil)
	left := func() []string {
		var out []string
		for name, n := range nets {
			if _, err := os.Stat("/sys/class/net/" + n.Interface); err == nil {
				out = append(out, "bridge of "+name+": "+n.Interface)
			}
			for _, tool := range []string{"iptables -w -S", "iptables -w -t nat -S"} {
				data, _ := exec.Command("sh", "-c", tool).Output()
				for _, line := range strings.Split(string(data), "\n") {
					if strings.Contains(line, n.Subnets[0].Subnet) {
						out = append(out, "rule of "+name+": "+line)
					}
				}
			}
		}
		return out
	}
	if l := left(); len(l) > 0 {
		t.Errorf("after the container's removal:\n%s", strings.Join(l, "\n"))
	}

	// A bridge left without ports (as by a teardown cut before netavark
	// removed it) goes with its network.
	if out, err := exec.Command("ip", "link", "add", nets["second"].Interface, "type", "bridge").CombinedOutput(); err != nil {
		t.Fatalf("add a bridge: %v %s", err, out)
	}
	for name := range nets {
		te.Must(http.StatusOK, "DELETE", "/networks/"+name, nil)
	}
	if l := left(); len(l) > 0 {
		t.Fatalf("after the networks' removal:\n%s", strings.Join(l, "\n"))
	}
}

// TestTeardownRemovesPortRulesNetavarkCouldNot: the port forwarding of a
// container that netavark cannot tear down goes all the same. netavark
// removes a container's port rules only in a namespace it can open, only
// on the networks its teardown is told of, and its DNAT rules only when it
// is told the container's addresses; a container whose namespace is gone, a
// connect to a second network that a kill -9 cut after netavark's setup
// (the record does not know the network), and a setup a kill -9 cut before
// its record (the record is the plan, without addresses) left DNAT and
// SETMARK rules in the networks' chains and the jumps to them (the chaos
// loop, with published ports: a host port forwarded to an address the next
// container gets).
func TestTeardownRemovesPortRulesNetavarkCouldNot(t *testing.T) {
	site := newCrashSite(t)
	te, stop := site.serve()
	te.loadBusybox()
	subnets := map[string]string{}
	chains := map[string]string{}
	for _, name := range []string{"first", "second"} {
		te.Must(http.StatusOK, "POST", "/networks/create", map[string]any{"name": name})
		var n struct {
			ID        string `json:"id"`
			Interface string `json:"network_interface"`
			Subnets   []struct {
				Subnet string `json:"subnet"`
			} `json:"subnets"`
		}
		if err := json.Unmarshal(te.Must(http.StatusOK, "GET", "/networks/"+name+"/json", nil), &n); err != nil || len(n.Subnets) == 0 {
			t.Fatalf("network %s: %+v %v", name, n, err)
		}
		subnets[name] = n.Subnets[0].Subnet
		// netavark's port-forwarding chain of the network:
		// NETAVARK-DN- and the first 13 hex digits of its ID's SHA-512.
		sum := sha512.Sum512([]byte(n.ID))
		chains[name] = "NETAVARK-DN-" + strings.ToUpper(hex.EncodeToString(sum[:]))[:13]
		t.Cleanup(func() {
			exec.Command("ip", "link", "del", n.Interface).Run()
			removeRulesNaming(n.Subnets[0].Subnet)
		})
	}
	type published struct{ id, port string }
	publish := func(name string) published {
		id := te.create(map[string]any{"name": name, "command": []string{"sleep", "300"},
			"netns": map[string]string{"nsmode": "bridge"}, "Networks": map[string]any{"first": map[string]any{}},
			"portmappings": []map[string]any{{"container_port": 80, "host_ip": "127.0.0.1"}}})
		te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
		var d struct {
			NetworkSettings struct {
				Ports map[string][]struct{ HostPort string }
			}
		}
		json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+id+"/json", nil), &d)
		if len(d.NetworkSettings.Ports["80/tcp"]) == 0 {
			t.Fatalf("%s publishes no port: %+v", name, d.NetworkSettings)
		}
		return published{id, d.NetworkSettings.Ports["80/tcp"][0].HostPort}
	}
	nsGone, cutConnect, cutSetup, cutTeardown := publish("nsgone"), publish("cutconnect"), publish("cutsetup"), publish("cutteardown")
	te.Must(http.StatusOK, "POST", "/networks/second/connect", map[string]any{"container": cutConnect.id})
	// The nat table's rules of the two containers' ports.
	rules := func() []string {
		data, _ := exec.Command("iptables", "-w", "-t", "nat", "-S").Output()
		var out []string
		for _, line := range strings.Split(string(data), "\n") {
			for _, p := range []published{nsGone, cutConnect, cutSetup, cutTeardown} {
				if strings.HasPrefix(line, "-A NETAVARK-") && (strings.Contains(line, "--dport "+p.port+" ") || strings.Contains(line, p.id)) {
					out = append(out, line)
				}
			}
		}
		return out
	}
	t.Cleanup(func() {
		for _, r := range rules() {
			exec.Command("sh", "-c", "iptables -w -t nat "+strings.Replace(r, "-A", "-D", 1)).Run()
		}
	})
	// The ports forwarded on first, cutconnect's on second too.
	if r := rules(); len(r) < 12 || !strings.Contains(strings.Join(r, "\n"), "--dport "+cutConnect.port) {
		t.Fatalf("the published ports' rules before: %q", r)
	}
	var d, cut struct{ NetworkSettings struct{ SandboxKey string } }
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+nsGone.id+"/json", nil), &d)
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+cutTeardown.id+"/json", nil), &cut)
	stop()

	// nsgone's namespace goes; cutconnect's record forgets second;
	// cutsetup's record is the setup's plan, written before netavark ran:
	// no addresses (a kill -9 before the record of what it set up).
	if err := unix.Unmount(d.NetworkSettings.SandboxKey, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	os.Remove(d.NetworkSettings.SandboxKey)
	// cutteardown's interface goes, its namespace stays: a teardown a kill
	// -9 cut after netavark removed the veth, before the record said so.
	if out, err := exec.Command("nsenter", "--net="+cut.NetworkSettings.SandboxKey, "ip", "link", "del", "eth0").CombinedOutput(); err != nil {
		t.Fatalf("remove cutteardown's interface: %v %s", err, out)
	}
	db, err := state.Open(context.Background(), filepath.Join(site.cfg.Root, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	row, err := db.GetContainer(context.Background(), cutConnect.id)
	if err != nil {
		t.Fatal(err)
	}
	var data map[string]any
	json.Unmarshal(row.Data, &data)
	delete(data["NetSetup"].(map[string]any)["Networks"].(map[string]any), "second")
	row.Data, _ = json.Marshal(data)
	if err := db.UpdateContainer(context.Background(), row); err != nil {
		t.Fatal(err)
	}
	if row, err = db.GetContainer(context.Background(), cutSetup.id); err != nil {
		t.Fatal(err)
	}
	data = nil
	json.Unmarshal(row.Data, &data)
	for _, po := range data["NetSetup"].(map[string]any)["Networks"].(map[string]any) {
		delete(po.(map[string]any), "static_ips")
	}
	row.Data, _ = json.Marshal(data)
	if err := db.UpdateContainer(context.Background(), row); err != nil {
		t.Fatal(err)
	}
	db.Close()

	var log syncbuf.Buffer
	site.logger = slog.New(slog.NewTextHandler(&log, nil))
	te, stop = site.serve()
	defer stop()
	for _, p := range []published{nsGone, cutConnect, cutSetup, cutTeardown} {
		te.Must(http.StatusOK, "DELETE", "/containers/"+p.id+"?force=true&timeout=0", nil)
	}
	if r := rules(); len(r) > 0 {
		t.Fatalf("the removed containers' port forwarding is left:\n%s", strings.Join(r, "\n"))
	}
	// An interface gone already is what a crash leaves, not a failure: no
	// warning for it (the chaos loop's log had dozens).
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, cutTeardown.id) {
			t.Errorf("warned of cutteardown's interface gone: %s", line)
		}
	}
	if !strings.Contains(log.String(), "its interface was gone already") {
		t.Errorf("the engine's log does not say cutteardown's interface was gone:\n%s", log.String())
	}
	for _, name := range []string{"first", "second"} {
		te.Must(http.StatusOK, "DELETE", "/networks/"+name, nil)
	}
	data2, _ := exec.Command("iptables", "-w", "-t", "nat", "-S").Output()
	for _, line := range strings.Split(string(data2), "\n") {
		for name, sub := range subnets {
			if strings.Contains(line, sub) {
				t.Errorf("rule of %s left: %s", name, line)
			}
			// The chain too, empty or not (found left by the chaos loop).
			if strings.Contains(line, chains[name]) {
				t.Errorf("port forwarding chain of %s left: %s", name, line)
			}
		}
	}
}

// removeRulesNaming deletes the iptables rules (filter and nat) that name
// cidr, and the chains those rules jump to.
func removeRulesNaming(cidr string) {
	for _, table := range []string{"filter", "nat"} {
		data, _ := exec.Command("iptables", "-w", "-t", table, "-S").Output()
		var chains []string
		for _, line := range strings.Split(string(data), "\n") {
			if !strings.HasPrefix(line, "-A ") || !strings.Contains(line, " "+cidr+" ") {
				continue
			}
			f := strings.Fields(line)
			f[0] = "-D"
			exec.Command("iptables", append([]string{"-w", "-t", table}, f...)...).Run()
			for i, w := range f {
				if w == "-j" && i+1 < len(f) && strings.HasPrefix(f[i+1], "NETAVARK-") {
					chains = append(chains, f[i+1])
				}
			}
		}
		for _, c := range chains {
			exec.Command("iptables", "-w", "-t", table, "-F", c).Run()
			exec.Command("iptables", "-w", "-t", table, "-X", c).Run()
		}
	}
}

// TestStartKillsWhatACutInfraCreateLeft: a kill -9 between the spawn of a
// pod's pause process and the record of its state leaves a process in the
// infra container's cgroup that no runtime state names (the chaos loop
// found such catatonit processes, and pod cgroups that could not be removed
// because of them). The next engine kills it and removes the cgroup; the
// pod's removal then leaves no cgroup.
func TestStartKillsWhatACutInfraCreateLeft(t *testing.T) {
	site := newCrashSite(t)
	te, stop := site.serve()
	te.Must(http.StatusCreated, "POST", "/pods/create", map[string]any{"name": "cutpod"})
	var pod struct {
		ID               string `json:"Id"`
		InfraContainerID string
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/pods/cutpod/json", nil), &pod)
	var infra struct{ State struct{ CgroupPath string } }
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+pod.InfraContainerID+"/json", nil), &infra)
	cgPath := infra.State.CgroupPath
	if cgPath == "" || !strings.Contains(cgPath, pod.InfraContainerID) {
		t.Fatalf("infra cgroup path %q", cgPath)
	}
	stop()

	// What the cut create left: a process in the infra's cgroup.
	sleeper := exec.Command("/bin/busybox", "sleep", "300")
	if err := sleeper.Start(); err != nil {
		t.Skip("needs busybox-static")
	}
	exited := make(chan struct{})
	go func() { sleeper.Wait(); close(exited) }()
	var dirs []string
	t.Cleanup(func() {
		sleeper.Process.Kill()
		<-exited
		for _, d := range dirs {
			os.Remove(d)
		}
	})
	for _, ctl := range []string{"pids", "memory"} {
		dir := filepath.Join("/sys/fs/cgroup", ctl, cgPath)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Skipf("cgroup v1 %s: %v", ctl, err)
		}
		dirs = append(dirs, dir)
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(fmt.Sprint(sleeper.Process.Pid)), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	te, stop = site.serve()
	defer stop()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the process in the infra's cgroup outlived the engine's start")
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("cgroup %s after the start: %v", d, err)
		}
	}
	te.Must(http.StatusOK, "DELETE", "/pods/cutpod?force=true", nil)
	if cg, _ := filepath.Glob("/sys/fs/cgroup/*/berth/berth-pod-" + pod.ID); len(cg) > 0 {
		t.Fatalf("pod cgroups after the pod's removal: %v", cg)
	}
}
