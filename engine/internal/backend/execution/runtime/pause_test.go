package runtime

import (
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// TestCanPause: only a plain catatonit -P spec, with namespaces the engine
// sets up itself and no confinement it does not apply, is a pause process.
func TestCanPause(t *testing.T) {
	base := func() *specs.Spec {
		return &specs.Spec{
			Process: &specs.Process{Args: []string{"/catatonit", "-P"}},
			Root:    &specs.Root{Path: "/r"},
			Linux: &specs.Linux{CgroupsPath: "/berth/berth-pod-x/berth-y", Namespaces: []specs.LinuxNamespace{
				{Type: "pid"}, {Type: "mount"}, {Type: "ipc"}, {Type: "uts"}, {Type: "network", Path: "/run/netns/x"}}},
		}
	}
	for _, tc := range []struct {
		name     string
		change   func(*specs.Spec)
		terminal bool
		want     bool
	}{
		{name: "infra", change: func(*specs.Spec) {}, want: true},
		{name: "joins a PID namespace", change: func(s *specs.Spec) { s.Linux.Namespaces[0].Path = "/proc/1/ns/pid" }, want: true},
		{name: "another command", change: func(s *specs.Spec) { s.Process.Args = []string{"/pause"} }},
		{name: "catatonit with more arguments", change: func(s *specs.Spec) { s.Process.Args = append(s.Process.Args, "-g") }},
		{name: "terminal", change: func(*specs.Spec) {}, terminal: true},
		{name: "user namespace", change: func(s *specs.Spec) {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: "user"})
		}},
		{name: "cgroup namespace", change: func(s *specs.Spec) {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: "cgroup"})
		}},
		{name: "joined mount namespace", change: func(s *specs.Spec) { s.Linux.Namespaces[1].Path = "/proc/1/ns/mnt" }},
		{name: "systemd cgroup path", change: func(s *specs.Spec) { s.Linux.CgroupsPath = "machine.slice:berth:y" }},
		{name: "AppArmor", change: func(s *specs.Spec) { s.Process.ApparmorProfile = "containers-default" }},
		{name: "seccomp", change: func(s *specs.Spec) { s.Linux.Seccomp = &specs.LinuxSeccomp{DefaultAction: specs.ActErrno} }},
		{name: "sysctls of its own namespaces", want: true, change: func(s *specs.Spec) {
			s.Linux.Sysctl = map[string]string{"net.ipv4.ping_group_range": "0 0", "kernel.msgmax": "9000", "fs.mqueue.msg_max": "20"}
		}},
		{name: "a host sysctl", change: func(s *specs.Spec) { s.Linux.Sysctl = map[string]string{"kernel.panic": "1"} }},
		{name: "net sysctl without a network namespace", change: func(s *specs.Spec) {
			s.Linux.Namespaces = s.Linux.Namespaces[:4]
			s.Linux.Sysctl = map[string]string{"net.core.somaxconn": "10"}
		}},
		{name: "a sysctl name with a slash", change: func(s *specs.Spec) { s.Linux.Sysctl = map[string]string{"net.ipv4/../../kernel.panic": "1"} }},
	} {
		s := base()
		tc.change(s)
		if got := canPause(s, tc.terminal, false); got != tc.want {
			t.Errorf("%s: canPause = %v, want %v", tc.name, got, tc.want)
		}
	}
	if canPause(nil, false, false) || canPause(base(), false, true) {
		t.Error("a missing spec or stdin is a pause process")
	}
}
