package enginetest

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// The leak checks: what a test's engine may leave on the host (processes,
// mounts, network namespaces, cgroups, interfaces, firewall rules, runtime
// state files) once its objects are removed. Start and StartProcess run
// them at every test's cleanup (checkHost); Leaks and HostLeaks serve the
// tests that look for what one operation left.

// Leaks lists what remains of the given pods and containers of the engine.
func (e *Engine) Leaks(podIDs, ctrIDs []string) []string {
	return Leaks(e.Root, e.RunRoot, podIDs, ctrIDs)
}

// HostLeaks lists what an engine whose objects are all removed left on the
// host: what Leaks finds of the given pods and containers; any process
// whose command line names the test's directory (conmon, runc,
// aardvark-dns of the engine's run root); mounts below the directory
// (MountsUnder); entries of the run root's runc state, pause and exit
// directories; and what NetworkLeaks finds.
func (e *Engine) HostLeaks(podIDs, ctrIDs []string) []string {
	out := Leaks(e.Root, e.RunRoot, podIDs, ctrIDs)
	out = append(out, processesNaming(e.Dir)...)
	for _, m := range MountsUnder(e.Dir) {
		out = append(out, "mount "+m)
	}
	for _, d := range []string{"runc", "pause", "exits"} {
		out = append(out, filesIn(filepath.Join(e.RunRoot, d))...)
	}
	return append(out, e.NetworkLeaks()...)
}

// NetworkLeaks lists what of the engine's networks is on the host:
// interfaces named with the test's bridge prefix, iptables rules naming an
// address of the test's subnets, network namespace files.
func (e *Engine) NetworkLeaks() []string {
	out := interfacesNamed(e.Nets.BridgePrefix)
	out = append(out, rulesNaming(e.Nets.SubnetPool)...)
	return append(out, filesIn(filepath.Join(e.RunRoot, "netns"))...)
}

// filesIn lists the entries of dir (none when it does not exist).
func filesIn(dir string) []string {
	var out []string
	entries, _ := os.ReadDir(dir)
	for _, entry := range entries {
		out = append(out, "file "+filepath.Join(dir, entry.Name()))
	}
	return out
}

// objectIDs lists the pods and containers the engine knows of, for the
// checks once they are removed.
func (e *Engine) objectIDs() (podIDs, ctrIDs []string) {
	var list []struct {
		ID string `json:"Id"`
	}
	if status, body := e.Do("GET", "/pods/json", nil); status == http.StatusOK && json.Unmarshal(body, &list) == nil {
		for _, p := range list {
			podIDs = append(podIDs, p.ID)
		}
	}
	list = nil
	if status, body := e.Do("GET", "/containers/json?all=true", nil); status == http.StatusOK && json.Unmarshal(body, &list) == nil {
		for _, c := range list {
			ctrIDs = append(ctrIDs, c.ID)
		}
	}
	return podIDs, ctrIDs
}

// checkHost fails the test for each thing HostLeaks still finds after a
// few seconds.
func (e *Engine) checkHost(podIDs, ctrIDs []string) {
	e.T.Helper()
	for _, l := range settled(func() []string { return e.HostLeaks(podIDs, ctrIDs) }) {
		e.T.Errorf("left on the host after the engine stopped with its objects removed: %s", l)
	}
}

// settled is what list still finds after up to ten seconds (monitors and
// helpers exit shortly after their container).
func settled(list func() []string) []string {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if leaks := list(); len(leaks) == 0 || time.Now().After(deadline) {
			return leaks
		}
	}
}

// Leaks lists what remains on the host of the given pods and containers
// of an engine with state under root and runRoot: cgroups (the systemd
// manager's scopes and slices included), processes whose command line
// names a container (its conmon, its runc) or still in its cgroup (a
// pause process included), runc's, crun's, pause process and exit state,
// the runtime's no-cgroup marks, network
// namespace files and mounts.
func Leaks(root, runRoot string, podIDs, ctrIDs []string) []string {
	var out []string
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*/berth")
	if _, err := os.Stat("/sys/fs/cgroup/berth"); err == nil {
		hierarchies = append(hierarchies, "/sys/fs/cgroup/berth")
	}
	for _, hier := range hierarchies {
		for _, name := range prefixed("berth-pod-", podIDs, "berth-", ctrIDs) {
			if _, err := os.Stat(filepath.Join(hier, name)); err == nil {
				out = append(out, "cgroup "+filepath.Join(hier, name))
			}
		}
	}
	// The systemd cgroup manager's units (a slice per pod, a scope per
	// container and one per its conmon) below its slice.
	const slice = "/sys/fs/cgroup/berth.slice"
	if _, err := os.Stat(slice); err == nil {
		var units []string
		for _, id := range podIDs {
			units = append(units, "berth-berth_pod_"+id+".slice")
		}
		for _, id := range ctrIDs {
			units = append(units, "berth-"+id+".scope", "berth-conmon-"+id+".scope")
		}
		for _, u := range units {
			if _, err := os.Stat(filepath.Join(slice, u)); err == nil {
				out = append(out, "cgroup "+filepath.Join(slice, u))
			}
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, _ := os.ReadFile(p)
		cmd := strings.ReplaceAll(string(data), "\x00", " ")
		cg, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cgroup"))
		for _, id := range ctrIDs {
			if strings.Contains(cmd, id) {
				out = append(out, "process "+p+" naming "+id+": "+cmd)
			}
			if strings.Contains(string(cg), "/berth-"+id+"\n") || strings.Contains(string(cg), "/berth-"+id+".scope\n") {
				out = append(out, "process "+filepath.Dir(p)+" in the cgroup of "+id+": "+cmd)
			}
		}
	}
	for _, id := range ctrIDs {
		for what, p := range map[string]string{
			"runc state": filepath.Join(runRoot, "runc", id), "crun state": filepath.Join(runRoot, "crun", id),
			"no-cgroup mark": filepath.Join(runRoot, "nocgroup", id), "pause process state": filepath.Join(runRoot, "pause", id),
			"network namespace": filepath.Join(runRoot, "netns", "berth-"+id), "exit file": filepath.Join(runRoot, "exits", id),
		} {
			if _, err := os.Stat(p); err == nil {
				out = append(out, what+" of "+id)
			}
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mounts")
	for _, line := range strings.Split(string(mounts), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !(strings.HasPrefix(f[1], root+"/") || strings.HasPrefix(f[1], runRoot+"/")) {
			continue
		}
		for _, id := range ctrIDs {
			if strings.Contains(f[1], id) {
				out = append(out, "mount "+f[1])
			}
		}
	}
	return out
}

// prefixed returns the names of pods and containers as their cgroups are
// named.
func prefixed(podPrefix string, podIDs []string, ctrPrefix string, ctrIDs []string) []string {
	var out []string
	for _, id := range podIDs {
		out = append(out, podPrefix+id)
	}
	for _, id := range ctrIDs {
		out = append(out, ctrPrefix+id)
	}
	return out
}

// processesNaming lists the processes whose command line names dir.
func processesNaming(dir string) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, _ := os.ReadFile(p)
		if cmd := strings.ReplaceAll(string(data), "\x00", " "); strings.Contains(cmd, dir+"/") {
			out = append(out, "process "+filepath.Dir(p)+": "+cmd)
		}
	}
	return out
}

// MountsUnder lists the mount points below dir but the storage driver's
// home (…/storage/overlay), which stays mounted while a store is open.
func MountsUnder(dir string) []string {
	var out []string
	data, _ := os.ReadFile("/proc/self/mounts")
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && strings.HasPrefix(f[1], dir+"/") && !strings.HasSuffix(f[1], "/storage/overlay") {
			out = append(out, f[1])
		}
	}
	return out
}

// interfacesNamed lists the network interfaces whose name starts with
// prefix (the test's bridges).
func interfacesNamed(prefix string) []string {
	if prefix == "" {
		return nil
	}
	data, _ := exec.Command("ip", "-o", "link", "show").Output()
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], prefix) {
			out = append(out, "interface "+strings.TrimSuffix(f[1], ":"))
		}
	}
	return out
}

var ipv4 = regexp.MustCompile(`\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b`)

// rulesNaming lists the iptables rules (nat and filter tables) naming an
// address inside one of the pools.
func rulesNaming(pools []string) []string {
	var nets []*net.IPNet
	for _, p := range pools {
		if _, n, err := net.ParseCIDR(p); err == nil {
			nets = append(nets, n)
		}
	}
	if len(nets) == 0 {
		return nil
	}
	var out []string
	for _, table := range []string{"nat", "filter"} {
		data, _ := exec.Command("iptables", "-w", "-t", table, "-S").Output()
		for _, rule := range strings.Split(string(data), "\n") {
			for _, addr := range ipv4.FindAllString(rule, -1) {
				if ip := net.ParseIP(addr); ip != nil && containsIP(nets, ip) {
					out = append(out, "iptables -t "+table+" "+rule)
					break
				}
			}
		}
	}
	return out
}

func containsIP(nets []*net.IPNet, ip net.IP) bool {
	for _, n := range nets {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}
