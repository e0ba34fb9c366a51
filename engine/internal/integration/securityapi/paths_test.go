package securityapi

import (
	"strings"
	"testing"
)

// TestKernelPathsAndPrivileges: Podman's masked and read-only kernel paths,
// --security-opt mask= and unmask=, no-new-privileges and the default
// capability set, as a container sees them.
func TestKernelPathsAndPrivileges(t *testing.T) {
	te := startEngine(t)
	te.Load(busybox)
	// /proc/timer_list exists on every kernel these tests run on; masked it reads empty.
	if out := te.MustPodman("run", "--rm", "localhost/busybox", "sh", "-c", "wc -c < /proc/timer_list"); strings.TrimSpace(out) != "0" {
		t.Errorf("/proc/timer_list in a default container: %s bytes, want 0 (masked)", out)
	}
	if out := te.MustPodman("run", "--rm", "--security-opt", "unmask=/proc/timer_list", "localhost/busybox", "sh", "-c", "wc -c < /proc/timer_list"); strings.TrimSpace(out) == "0" {
		t.Errorf("unmask=/proc/timer_list: still empty")
	}
	if out := te.MustPodman("run", "--rm", "--security-opt", "mask=/proc/cpuinfo", "localhost/busybox", "sh", "-c", "wc -c < /proc/cpuinfo"); strings.TrimSpace(out) != "0" {
		t.Errorf("mask=/proc/cpuinfo: %s bytes, want 0", out)
	}
	ro := func(args ...string) bool {
		out := te.MustPodman(append(append([]string{"run", "--rm"}, args...), "localhost/busybox", "cat", "/proc/self/mountinfo")...)
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 5 && f[4] == "/proc/sys" {
				return strings.HasPrefix(f[5], "ro")
			}
		}
		return false
	}
	if !ro() {
		t.Errorf("/proc/sys is not read-only in a default container")
	}
	if ro("--security-opt", "unmask=ALL") {
		t.Errorf("/proc/sys is read-only with unmask=ALL")
	}

	status := func(args ...string) string {
		return te.MustPodman(append(append([]string{"run", "--rm"}, args...), "localhost/busybox", "cat", "/proc/self/status")...)
	}
	field := func(out, name string) string {
		for _, line := range strings.Split(out, "\n") {
			if v, ok := strings.CutPrefix(line, name+":"); ok {
				return strings.TrimSpace(v)
			}
		}
		return ""
	}
	if v := field(status(), "NoNewPrivs"); v != "0" {
		t.Errorf("default NoNewPrivs %s", v)
	}
	if v := field(status("--security-opt", "no-new-privileges"), "NoNewPrivs"); v != "1" {
		t.Errorf("no-new-privileges: NoNewPrivs %s, want 1", v)
	}
	// Podman's default set: chown dac_override fowner fsetid kill setgid
	// setuid setpcap net_bind_service sys_chroot setfcap = 0x800405fb.
	if v := field(status(), "CapBnd"); v != "00000000800405fb" {
		t.Errorf("default CapBnd %s, want Podman's 00000000800405fb", v)
	}
	if v := field(status("--cap-drop", "ALL"), "CapBnd"); v != "0000000000000000" {
		t.Errorf("--cap-drop ALL: CapBnd %s", v)
	}
	if v := field(status("--cap-drop", "ALL", "--cap-add", "NET_RAW"), "CapBnd"); v != "0000000000002000" {
		t.Errorf("--cap-drop ALL --cap-add NET_RAW: CapBnd %s", v)
	}
	if out, err := te.Podman("run", "--rm", "--cap-add", "SYS_RESOURCE", "localhost/busybox", "true"); err == nil || !strings.Contains(out, "bounding set") {
		t.Errorf("--cap-add of a capability the engine lacks: %v\n%s", err, out)
	}
}
