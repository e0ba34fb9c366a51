package core

import (
	"errors"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// TestLogConfigValidate: the log drivers the engine has pass, with a tag
// only for journald; anything it would ignore is a 400 naming the member.
func TestLogConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		lc    *LogConfig
		field string // "" accepted
		want  string
	}{
		{nil, "", ""},
		{&LogConfig{}, "", ""},
		{&LogConfig{Driver: "k8s-file"}, "", ""},
		{&LogConfig{Driver: "journald"}, "", ""},
		{&LogConfig{Driver: "journald", Tag: "web"}, "", ""},
		{&LogConfig{Driver: "syslog"}, "log_configuration.driver", `"syslog" is not supported`},
		// Docker's name, which Podman accepts and writes as k8s-file.
		{&LogConfig{Driver: "json-file", Size: 100}, "", ""},
		{&LogConfig{Driver: "k8s-file", Size: 100}, "", ""},
		{&LogConfig{Size: 1 << 20}, "", ""},
		{&LogConfig{Driver: "k8s-file", Size: -1}, "log_configuration.size", "negative"},
		{&LogConfig{Driver: "journald", Size: 100}, "log_configuration.size", "k8s-file"},
		{&LogConfig{Driver: "k8s-file", Path: "/tmp/x"}, "log_configuration.path", "path"},
		{&LogConfig{Driver: "journald", Options: map[string]string{"tag": "web"}}, "", ""},
		{&LogConfig{Driver: "journald", Options: map[string]string{"max-size": "1k"}}, "log_configuration.options", "max-size"},
		{&LogConfig{Driver: "k8s-file", Options: map[string]string{"tag": "web"}}, "log_configuration.tag", "journald"},
		{&LogConfig{Driver: "k8s-file", Tag: "web"}, "log_configuration.tag", "journald"},
		{&LogConfig{Tag: "web"}, "log_configuration.tag", "journald"},
		{&LogConfig{Driver: "journald", Tag: "a\nb"}, "log_configuration.tag", "newline"},
	} {
		spec := ContainerSpec{Image: "busybox", LogConfiguration: tc.lc}
		err := spec.Validate()
		var fe *FieldError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%+v: %v, want accepted", tc.lc, err)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: %v, want a 400 naming %s saying %q", tc.lc, err, tc.field, tc.want)
		}
	}
	if tag := (&ContainerSpec{LogConfiguration: &LogConfig{Options: map[string]string{"tag": "t"}}}).LogTag(); tag != "t" {
		t.Errorf("tag from options %q", tag)
	}
	if d := (&ContainerSpec{LogConfiguration: &LogConfig{Driver: "json-file"}}).LogDriver(); d != LogDriverK8sFile {
		t.Errorf("json-file is written as %q, want k8s-file", d)
	}
	if d := (&ContainerSpec{}).LogDriver(); d != LogDriverK8sFile {
		t.Errorf("default driver %q", d)
	}
}

// TestIPCAndUTSValidate: the IPC and UTS modes the engine has pass; another
// mode, a /dev/shm size in the host's IPC namespace and a hostname in the
// host's UTS namespace are a 400 naming the member.
func TestIPCAndUTSValidate(t *testing.T) {
	size := int64(1 << 20)
	for _, tc := range []struct {
		spec  ContainerSpec
		field string // "" accepted
	}{
		{ContainerSpec{IpcNS: Namespace{NSMode: "shareable"}}, ""},
		{ContainerSpec{IpcNS: Namespace{NSMode: "private"}, ShmSize: &size}, ""},
		{ContainerSpec{IpcNS: Namespace{NSMode: "none"}}, ""},
		{ContainerSpec{IpcNS: Namespace{NSMode: "host"}}, ""},
		{ContainerSpec{IpcNS: Namespace{NSMode: "host"}, ShmSize: &size}, "shm_size"},
		{ContainerSpec{IpcNS: Namespace{NSMode: "container", Value: "abc"}}, ""},
		{ContainerSpec{IpcNS: Namespace{NSMode: "container"}}, "ipcns"},
		{ContainerSpec{IpcNS: Namespace{NSMode: "container", Value: "abc"}, ShmSize: &size}, "shm_size"},
		{ContainerSpec{IpcNS: Namespace{NSMode: "private", Value: "abc"}}, "ipcns"},
		{ContainerSpec{IpcNS: Namespace{NSMode: "ns", Value: "/proc/1/ns/ipc"}}, "ipcns"},
		{ContainerSpec{UtsNS: Namespace{NSMode: "private"}, Hostname: "web"}, ""},
		{ContainerSpec{UtsNS: Namespace{NSMode: "host"}}, ""},
		{ContainerSpec{UtsNS: Namespace{NSMode: "host"}, Hostname: "web"}, "hostname"},
		{ContainerSpec{UtsNS: Namespace{NSMode: "ns", Value: "/proc/1/ns/uts"}}, "utsns"},
		{ContainerSpec{Timezone: "Europe/Berlin"}, ""},
		{ContainerSpec{Timezone: "local"}, ""},
		{ContainerSpec{Timezone: "/etc/passwd"}, "timezone"},
		{ContainerSpec{Timezone: "Europe/../../etc/passwd"}, "timezone"},
	} {
		tc.spec.Image = "busybox"
		err := tc.spec.Validate()
		var fe *FieldError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("ipc %+v uts %+v: %v, want accepted", tc.spec.IpcNS, tc.spec.UtsNS, err)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
			t.Errorf("ipc %+v uts %+v: %v, want a 400 naming %s", tc.spec.IpcNS, tc.spec.UtsNS, err, tc.field)
		}
	}
}

// TestResolveThrottleDevices: throttles by path go into the block I/O
// resources by device number, once however often they are resolved; a path
// the lookup refuses is a 400 naming the member.
func TestResolveThrottleDevices(t *testing.T) {
	lookup := func(path string) (int64, int64, error) {
		if path == "/dev/vda" {
			return 254, 0, nil
		}
		return 0, 0, errors.New(path + " is not a block device")
	}
	s := ContainerSpec{ThrottleReadBpsDevice: map[string]specs.LinuxThrottleDevice{"/dev/vda": {Rate: 1 << 20}},
		ThrottleWriteIOPSDevice: map[string]specs.LinuxThrottleDevice{"/dev/vda": {Rate: 100}}}
	for range 2 {
		if err := s.ResolveThrottleDevices(lookup); err != nil {
			t.Fatal(err)
		}
	}
	b := s.Resources.BlockIO
	if len(b.ThrottleReadBpsDevice) != 1 || b.ThrottleReadBpsDevice[0].Major != 254 || b.ThrottleReadBpsDevice[0].Rate != 1<<20 ||
		len(b.ThrottleWriteIOPSDevice) != 1 || b.ThrottleWriteIOPSDevice[0].Rate != 100 || len(b.ThrottleWriteBpsDevice) != 0 {
		t.Fatalf("block I/O: %+v", b)
	}
	bad := ContainerSpec{ThrottleReadIOPSDevice: map[string]specs.LinuxThrottleDevice{"/dev/null": {Rate: 1}}}
	var fe *FieldError
	if err := bad.ResolveThrottleDevices(lookup); !errors.As(err, &fe) || fe.Field != "throttleReadIOPSDevice" {
		t.Fatalf("a character device: %v", err)
	}
}

// TestVolumeSubPathChecked: a volume's SubPath is a path inside the volume
// (a leading "/" is its root, as Podman joins it); one that leads out, is
// empty once cleaned, or goes with an anonymous volume is a 400 naming it.
func TestVolumeSubPathChecked(t *testing.T) {
	for sub, want := range map[string]string{"sub": "sub", "/sub/x": "sub/x", "a/../b": "b", "./c/": "c"} {
		spec := ContainerSpec{Image: "busybox", Volumes: []NamedVolume{{Name: "a", Dest: "/a"}, {Name: "b", Dest: "/b", SubPath: sub}}}
		if err := spec.Validate(); err != nil {
			t.Errorf("subpath %q: %v", sub, err)
		}
		if got, err := CleanVolumeSubPath(sub); err != nil || got != want {
			t.Errorf("CleanVolumeSubPath(%q) = %q, %v; want %q", sub, got, err, want)
		}
	}
	for _, v := range []NamedVolume{
		{Name: "b", Dest: "/b", SubPath: "../x"},
		{Name: "b", Dest: "/b", SubPath: "a/../../x"},
		{Name: "b", Dest: "/b", SubPath: "/"},
		{Name: "b", Dest: "/b", SubPath: "a\x00b"},
		{Dest: "/b", SubPath: "sub", IsAnonymous: true},
	} {
		spec := ContainerSpec{Image: "busybox", Volumes: []NamedVolume{{Name: "a", Dest: "/a"}, v}}
		var fe *FieldError
		if err := spec.Validate(); !errors.As(err, &fe) || fe.Field != "volumes[1].SubPath" {
			t.Errorf("volume %+v: %v, want a 400 naming volumes[1].SubPath", v, err)
		}
	}
}
