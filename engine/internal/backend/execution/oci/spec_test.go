package oci

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/shared/rlimit"
	imgspec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func fieldOf(t *testing.T, err error) string {
	t.Helper()
	var fe *core.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v is not a field error", err)
	}
	if !errors.Is(err, core.ErrInvalidArgument) {
		t.Fatalf("error %v is not ErrInvalidArgument", err)
	}
	return fe.Field
}

func TestRlimitsClampToEngineHardLimits(t *testing.T) {
	host := Host{HardLimits: map[string]uint64{"RLIMIT_NOFILE": 20000, "RLIMIT_NPROC": 96551, "RLIMIT_CORE": rlimit.Unlimited}}
	tests := []struct {
		name     string
		req      []rlimit.Rlimit
		want     map[string][2]uint64
		warnings int
		field    string
	}{
		{name: "defaults clamped", want: map[string][2]uint64{"RLIMIT_NOFILE": {20000, 20000}, "RLIMIT_NPROC": {96551, 96551}}},
		{name: "unlimited lowered silently", req: []rlimit.Rlimit{{Type: "nofile", Hard: rlimit.Unlimited, Soft: rlimit.Unlimited}},
			want: map[string][2]uint64{"RLIMIT_NOFILE": {20000, 20000}}},
		{name: "explicit above hard warns", req: []rlimit.Rlimit{{Type: "RLIMIT_NOFILE", Hard: 50000, Soft: 100}},
			want: map[string][2]uint64{"RLIMIT_NOFILE": {100, 20000}}, warnings: 1},
		{name: "within limits kept", req: []rlimit.Rlimit{{Type: "nofile", Hard: 20, Soft: 10}, {Type: "core", Hard: rlimit.Unlimited, Soft: 0}},
			want: map[string][2]uint64{"RLIMIT_NOFILE": {10, 20}, "RLIMIT_CORE": {0, rlimit.Unlimited}}},
		{name: "unknown type", req: []rlimit.Rlimit{{Type: "bogus", Hard: 1, Soft: 1}}, field: "r_limits[0].type"},
		{name: "soft above hard", req: []rlimit.Rlimit{{Type: "nofile", Hard: 1, Soft: 2}}, field: "r_limits[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, warns, err := Rlimits(tt.req, host)
			if tt.field != "" {
				if f := fieldOf(t, err); f != tt.field {
					t.Fatalf("field %q, want %q", f, tt.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(warns) != tt.warnings {
				t.Fatalf("warnings %v, want %d", warns, tt.warnings)
			}
			for name, sh := range tt.want {
				i := slices.IndexFunc(got, func(r specs.POSIXRlimit) bool { return r.Type == name })
				if i < 0 || got[i].Soft != sh[0] || got[i].Hard != sh[1] {
					t.Fatalf("%s: got %+v, want soft %d hard %d", name, got, sh[0], sh[1])
				}
			}
		})
	}
}

func TestProcessArgs(t *testing.T) {
	img := imgspec.ImageConfig{Entrypoint: []string{"/entry"}, Cmd: []string{"default"}}
	tests := []struct {
		name string
		spec core.ContainerSpec
		img  imgspec.ImageConfig
		want []string
	}{
		{"image only", core.ContainerSpec{}, img, []string{"/entry", "default"}},
		{"command replaces cmd", core.ContainerSpec{Command: []string{"x"}}, img, []string{"/entry", "x"}},
		{"entrypoint drops image cmd", core.ContainerSpec{Entrypoint: []string{"/bin/sh"}}, img, []string{"/bin/sh"}},
		{"both", core.ContainerSpec{Entrypoint: []string{"/bin/sh"}, Command: []string{"-c", "true"}}, img, []string{"/bin/sh", "-c", "true"}},
		{"empty entrypoint clears", core.ContainerSpec{Entrypoint: []string{}, Command: []string{"ls"}}, img, []string{"ls"}},
	}
	for _, tt := range tests {
		got, err := ProcessArgs(&tt.spec, tt.img)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("%s: got %v %v, want %v", tt.name, got, err, tt.want)
		}
	}
	if _, err := ProcessArgs(&core.ContainerSpec{}, imgspec.ImageConfig{}); fieldOf(t, err) != "command" {
		t.Fatal("no command must name the command field")
	}
}

func TestMergeEnv(t *testing.T) {
	for _, tc := range []struct {
		name           string
		image          []string
		spec           core.ContainerSpec
		hostname, home string
		want           []string
	}{
		{"Podman's defaults (containers.conf's PATH and TERM, container=podman) after the request's", []string{"PATH=/img", "A=1"},
			core.ContainerSpec{Env: map[string]string{"A": "2", "B": "3"}}, "h", "/root",
			[]string{"PATH=/img", "A=2", "B=3", "TERM=xterm", "container=podman", "HOSTNAME=h", "HOME=/root"}},
		{"the request may set container itself", nil,
			core.ContainerSpec{Env: map[string]string{"container": "other"}}, "h", "/",
			[]string{"container=other", "PATH=" + DefaultPath, "TERM=xterm", "HOSTNAME=h", "HOME=/"}},
		{"dockerd's defaults: PATH only", nil,
			core.ContainerSpec{DockerEnv: true}, "h", "/root",
			[]string{"PATH=" + DefaultPath, "HOSTNAME=h", "HOME=/root"}},
		{"dockerd's defaults with a terminal: TERM too", nil,
			core.ContainerSpec{DockerEnv: true, Terminal: true}, "h", "/root",
			[]string{"PATH=" + DefaultPath, "TERM=xterm", "HOSTNAME=h", "HOME=/root"}},
		{"no hostname or home: neither is added (inspect before the first init)", nil,
			core.ContainerSpec{}, "", "",
			[]string{"PATH=" + DefaultPath, "TERM=xterm", "container=podman"}},
		// --env-merge expands the defaults; --unsetenv drops one of them
		// (the request's own env still sets it); --unsetenv-all drops them
		// all.
		{"env-merge and unsetenv", []string{"PATH=/img", "GREETING=hello", "LANG=C"},
			core.ContainerSpec{EnvMerge: []string{"PATH=/extra:${PATH}", "GREETING=$GREETING world", "NEW=${container}-${NOPE}"},
				UnsetEnv: []string{"LANG", "container", "TERM"}}, "h", "/root",
			[]string{"PATH=/extra:/img", "GREETING=hello world", "NEW=-", "HOSTNAME=h", "HOME=/root"}},
		{"unsetenv with the request's own", []string{"PATH=/img", "GREETING=hello", "LANG=C"},
			core.ContainerSpec{UnsetEnv: []string{"PATH"}, Env: map[string]string{"PATH": "/mine"}}, "h", "/",
			[]string{"GREETING=hello", "LANG=C", "PATH=/mine", "TERM=xterm", "container=podman", "HOSTNAME=h", "HOME=/"}},
		{"unsetenv-all", []string{"PATH=/img"},
			core.ContainerSpec{UnsetEnvAll: true, Terminal: true, Env: map[string]string{"ONLY": "me"}}, "h", "/",
			[]string{"ONLY=me", "HOSTNAME=h", "HOME=/"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := MergeEnv(tc.image, &tc.spec, tc.hostname, tc.home); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTmpfsOptions(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
		err  bool
	}{
		{nil, "rw,rprivate,nosuid,nodev,tmpcopyup", false},
		{[]string{"size=1m"}, "size=1m,rw,rprivate,nosuid,nodev,tmpcopyup", false},
		{[]string{"rw", "rprivate", "nosuid", "nodev", "tmpcopyup"}, "rw,rprivate,nosuid,nodev,tmpcopyup", false},
		{[]string{"ro", "shared", "suid", "dev", "notmpcopyup", "noexec"}, "ro,shared,suid,dev,noexec", false},
		{[]string{"bogus"}, "", true},
		{[]string{"size"}, "", true},
		{[]string{"tmpcopyup=1"}, "", true},
	} {
		got, err := TmpfsOptions(tc.in)
		if (err != nil) != tc.err || err == nil && strings.Join(got, ",") != tc.want {
			t.Errorf("TmpfsOptions(%q) = %q, %v; want %q (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestMountsValidation(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		mounts []specs.Mount
		field  string
	}{
		{[]specs.Mount{{Destination: "rel", Type: "bind", Source: dir}}, "mounts[0].destination"},
		{[]specs.Mount{{Destination: "/x", Type: "bind", Source: "relative"}}, "mounts[0].source"},
		{[]specs.Mount{{Destination: "/x", Type: "bind", Source: filepath.Join(dir, "missing")}}, "mounts[0].source"},
		{[]specs.Mount{{Destination: "/x", Type: "nfs", Source: "a"}}, "mounts[0].type"},
		{[]specs.Mount{{Destination: "/x", Type: "bind", Source: dir, Options: []string{"bogus"}}}, "mounts[0].options"},
		{[]specs.Mount{{Destination: "/x", Type: "tmpfs"}, {Destination: "/x/", Type: "tmpfs"}}, "mounts[1].destination"},
	}
	for _, tt := range tests {
		_, err := Mounts(&core.ContainerSpec{Mounts: tt.mounts}, Files{Hosts: "/h", ResolvConf: "/r", Hostname: "/n"}, false)
		if f := fieldOf(t, err); f != tt.field {
			t.Errorf("%+v: field %q, want %q", tt.mounts, f, tt.field)
		}
	}
	got, err := Mounts(&core.ContainerSpec{Mounts: []specs.Mount{
		{Destination: "/mnt", Type: "bind", Source: dir, Options: []string{"ro"}},
		{Destination: "/run", Type: "tmpfs", Source: "tmpfs"},
		{Destination: "/dev/shm", Type: "tmpfs", Options: []string{"size=1m"}},
	}}, Files{Hosts: "/h", ResolvConf: "/r", Hostname: "/n"}, false)
	if err != nil {
		t.Fatal(err)
	}
	var shm int
	for _, m := range got {
		if m.Destination == "/dev/shm" {
			shm++
			if !slices.Contains(m.Options, "size=1m") {
				t.Fatalf("request's /dev/shm must replace the default: %+v", m)
			}
		}
		if m.Destination == "/mnt" && !slices.Equal(m.Options, []string{"ro", "rbind"}) {
			t.Fatalf("bind options %v", m.Options)
		}
	}
	if shm != 1 {
		t.Fatalf("%d /dev/shm mounts", shm)
	}
}

func TestResolveUserFromImagePasswd(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("root:x:0:0:root:/root:/bin/sh\napp:x:1000:1001:app:/home/app:/bin/sh\n"), 0o644)
	os.WriteFile(filepath.Join(root, "etc/group"), []byte("root:x:0:\napp:x:1001:\nextra:x:2000:app\n"), 0o644)
	tests := []struct {
		spec      string
		uid, gid  int
		home      string
		wantField string
	}{
		{"", 0, 0, "/root", ""},
		{"app", 1000, 1001, "/home/app", ""},
		{"1000", 1000, 1001, "/home/app", ""},
		{"app:extra", 1000, 2000, "/home/app", ""},
		{"4242:4343", 4242, 4343, "/", ""},
		{"nobody-here", 0, 0, "", "user"},
	}
	for _, tt := range tests {
		u, err := ResolveUser(root, tt.spec, nil)
		if tt.wantField != "" {
			if f := fieldOf(t, err); f != tt.wantField {
				t.Errorf("%q: field %q", tt.spec, f)
			}
			continue
		}
		if err != nil || u.Uid != tt.uid || u.Gid != tt.gid || u.Home != tt.home {
			t.Errorf("%q: got %+v %v", tt.spec, u, err)
		}
	}
	// A symlinked passwd must not be followed out of the rootfs.
	outside := filepath.Join(t.TempDir(), "passwd")
	os.WriteFile(outside, []byte("evil:x:7:7::/evil:/bin/sh\n"), 0o644)
	os.Remove(filepath.Join(root, "etc/passwd"))
	os.Symlink(outside, filepath.Join(root, "etc/passwd"))
	if u, err := ResolveUser(root, "evil", nil); err == nil {
		t.Fatalf("resolved %+v through a symlink out of the rootfs", u)
	}
}

func TestGenerateCapabilitiesAndNamespaces(t *testing.T) {
	root := t.TempDir()
	host := Host{BoundingCaps: []string{"CAP_CHOWN", "CAP_KILL", "CAP_NET_ADMIN", "CAP_SETUID", "CAP_SETGID"}, HardLimits: map[string]uint64{}}
	in := func(s core.ContainerSpec) Input {
		return Input{ID: strings.Repeat("a", 64), Spec: &s, Rootfs: root, Image: imgspec.ImageConfig{Cmd: []string{"sh"}}, Host: host,
			HostsFile: "/h", ResolvConfFile: "/r", HostnameFile: "/n", CgroupsPath: "/berth/x"}
	}
	res, err := Generate(in(core.ContainerSpec{CapAdd: []string{"net_admin"}, CapDrop: []string{"CAP_KILL"}, NetNS: core.Namespace{NSMode: "none"}}))
	if err != nil {
		t.Fatal(err)
	}
	caps := res.Spec.Process.Capabilities.Bounding
	if !slices.Contains(caps, "CAP_NET_ADMIN") || slices.Contains(caps, "CAP_KILL") || !slices.Contains(caps, "CAP_CHOWN") {
		t.Fatalf("caps %v", caps)
	}
	if !slices.ContainsFunc(res.Spec.Linux.Namespaces, func(n specs.LinuxNamespace) bool { return n.Type == specs.NetworkNamespace }) {
		t.Fatal("netns none must have its own network namespace")
	}
	if res.Spec.Hostname != "aaaaaaaaaaaa" {
		t.Fatalf("hostname %q", res.Spec.Hostname)
	}
	res, err = Generate(in(core.ContainerSpec{NetNS: core.Namespace{NSMode: "host"}}))
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(res.Spec.Linux.Namespaces, func(n specs.LinuxNamespace) bool { return n.Type == specs.NetworkNamespace }) {
		t.Fatal("netns host must share the host's network namespace")
	}
	for _, tt := range []struct {
		spec  core.ContainerSpec
		field string
	}{
		{core.ContainerSpec{CapAdd: []string{"SYS_RESOURCE"}}, "cap_add"},
		{core.ContainerSpec{CapAdd: []string{"NOT_A_CAP"}}, "cap_add"},
		{core.ContainerSpec{NetNS: core.Namespace{NSMode: "slirp4netns"}}, "netns"},
		{core.ContainerSpec{WorkDir: "relative"}, "work_dir"},
		{core.ContainerSpec{Umask: "99"}, "umask"},
		{core.ContainerSpec{Resources: &specs.LinuxResources{Memory: &specs.LinuxMemory{Limit: ptr(int64(1024))}}}, "resource_limits.memory.limit"},
		{core.ContainerSpec{Resources: &specs.LinuxResources{CPU: &specs.LinuxCPU{Shares: ptr(uint64(1))}}}, "resource_limits.cpu.shares"},
	} {
		_, err := Generate(in(tt.spec))
		if f := fieldOf(t, err); f != tt.field {
			t.Errorf("%+v: field %q, want %q", tt.spec, f, tt.field)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestKernelPaths: Podman's masked and read-only paths, plus mask, less
// unmask; unmask=ALL drops every default one.
func TestKernelPaths(t *testing.T) {
	masked, readonly := kernelPaths(nil, nil)
	if !slices.Contains(masked, "/proc/kcore") || !slices.Contains(readonly, "/proc/sysrq-trigger") {
		t.Fatalf("defaults: %v %v", masked, readonly)
	}
	masked, readonly = kernelPaths([]string{"/proc/cpuinfo", "/proc/kcore"}, []string{"/proc/keys", "/proc/sys/"})
	if !slices.Contains(masked, "/proc/cpuinfo") || slices.Contains(masked, "/proc/keys") || slices.Contains(readonly, "/proc/sys") {
		t.Fatalf("mask and unmask: %v %v", masked, readonly)
	}
	if n := len(slices.DeleteFunc(slices.Clone(masked), func(p string) bool { return p != "/proc/kcore" })); n != 1 {
		t.Fatalf("/proc/kcore masked %d times", n)
	}
	masked, readonly = kernelPaths([]string{"/proc/cpuinfo"}, []string{"ALL"})
	if len(masked) != 1 || len(readonly) != 0 {
		t.Fatalf("unmask ALL: %v %v", masked, readonly)
	}
}

// TestMountsIPCModesAndImageFiles: --ipc none drops /dev/shm and --ipc host
// binds the host's, without disturbing the other mounts (a host network
// still binds /sys); --no-hosts and --dns none leave the image's files.
func TestMountsIPCModesAndImageFiles(t *testing.T) {
	byDest := func(ms []specs.Mount) map[string]specs.Mount {
		out := map[string]specs.Mount{}
		for _, m := range ms {
			out[m.Destination] = m
		}
		return out
	}
	ms, err := Mounts(&core.ContainerSpec{IpcNS: core.Namespace{NSMode: "none"}, NetNS: core.Namespace{NSMode: core.NetNSHost}}, Files{Hosts: "/h", ResolvConf: "/r", Hostname: "/n"}, false)
	if err != nil {
		t.Fatal(err)
	}
	m := byDest(ms)
	if _, ok := m["/dev/shm"]; ok {
		t.Fatalf("--ipc none kept /dev/shm: %+v", m["/dev/shm"])
	}
	if m["/sys"].Type != "bind" || m["/sys/fs/cgroup"].Type != "cgroup" || m["/dev/mqueue"].Type != "mqueue" {
		t.Fatalf("--ipc none with the host's network: /sys %+v, /sys/fs/cgroup %+v, /dev/mqueue %+v", m["/sys"], m["/sys/fs/cgroup"], m["/dev/mqueue"])
	}
	ms, err = Mounts(&core.ContainerSpec{IpcNS: core.Namespace{NSMode: "host"}, UseImageHosts: true, UseImageResolvConf: true}, Files{Hosts: "/h", ResolvConf: "/r", Hostname: "/n"}, false)
	if err != nil {
		t.Fatal(err)
	}
	m = byDest(ms)
	if m["/dev/shm"].Type != "bind" || m["/dev/shm"].Source != "/dev/shm" || m["/sys"].Type != "sysfs" {
		t.Fatalf("--ipc host: /dev/shm %+v, /sys %+v", m["/dev/shm"], m["/sys"])
	}
	if _, ok := m["/etc/hosts"]; ok {
		t.Fatal("--no-hosts still binds /etc/hosts")
	}
	if _, ok := m["/etc/resolv.conf"]; ok {
		t.Fatal("--dns none still binds /etc/resolv.conf")
	}
	if m["/etc/hostname"].Source != "/n" {
		t.Fatalf("/etc/hostname: %+v", m["/etc/hostname"])
	}
}

// TestHostsFileHostGateway: --add-host NAME:host-gateway names the host as
// the container reaches it (its network's gateway; 127.0.0.1 in the host's
// network namespace), and waits while that is not known; an address that is
// not an IP is a 400 naming the entry.
func TestHostsFileHostGateway(t *testing.T) {
	s := &core.ContainerSpec{HostAdd: []string{"gw:host-gateway", "six:[fd00::1]", "four:10.1.2.3"}}
	hosts, err := HostsFile(s, "h", "n", "10.77.0.1")
	if err != nil || !strings.Contains(hosts, "10.77.0.1\tgw\n") || !strings.Contains(hosts, "fd00::1\tsix\n") || !strings.Contains(hosts, "10.1.2.3\tfour\n") {
		t.Fatalf("hosts %q (%v)", hosts, err)
	}
	if hosts, _ := HostsFile(s, "h", "n", ""); strings.Contains(hosts, "gw") {
		t.Errorf("an unknown gateway wrote %q", hosts)
	}
	s.NetNS = core.Namespace{NSMode: core.NetNSHost}
	if hosts, _ := HostsFile(s, "h", "n", ""); !strings.Contains(hosts, "127.0.0.1\tgw\n") {
		t.Errorf("in the host's network: %q", hosts)
	}
	var fe *core.FieldError
	if _, err := HostsFile(&core.ContainerSpec{HostAdd: []string{"a:1.2.3.4", "b:nonsense"}}, "h", "n", ""); !errors.As(err, &fe) || fe.Field != "hostadd[1]" {
		t.Errorf("a bad address: %v", err)
	}
}

// TestDevptsMount: a devpts mount of the request (podman's --mount
// type=devpts) is always a new instance with nosuid and noexec; its
// numeric options pass, anything else is a 400 naming the options.
func TestDevptsMount(t *testing.T) {
	m, err := userMount("mounts[0]", specs.Mount{Type: "devpts", Destination: "/dev/pts2", Options: []string{"mode=0620", "gid=5", "max=10"}})
	if err != nil || m.Source != "devpts" || !slices.Contains(m.Options, "newinstance") || !slices.Contains(m.Options, "nosuid") || !slices.Contains(m.Options, "mode=0620") {
		t.Fatalf("devpts: %+v %v", m, err)
	}
	for _, bad := range []string{"mode=rw", "uid=-1", "dev", "exec"} {
		var fe *core.FieldError
		if _, err := userMount("mounts[0]", specs.Mount{Type: "devpts", Destination: "/dev/pts2", Options: []string{bad}}); !errors.As(err, &fe) || fe.Field != "mounts[0].options" {
			t.Errorf("devpts option %q: %v", bad, err)
		}
	}
}
