package dockerapi

import (
	"errors"
	"net"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	containertypes "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	networktypes "github.com/docker/docker/api/types/network"
	"github.com/docker/go-connections/nat"

	"github.com/berth-project/berth/engine/internal/core"
)

func TestSplitAndCompareVersions(t *testing.T) {
	for _, tt := range []struct {
		path, version, rest string
		ok                  bool
	}{
		{"/v1.41/containers/json", "1.41", "/containers/json", true},
		{"/v1.24/_ping", "1.24", "/_ping", true},
		{"/volumes", "", "", false},
		{"/version", "", "", false},
		{"/v/x", "", "", false},
	} {
		v, rest, ok := splitVersion(tt.path)
		if v != tt.version || rest != tt.rest || ok != tt.ok {
			t.Errorf("splitVersion(%q) = %q %q %v", tt.path, v, rest, ok)
		}
	}
	if compareVersions("1.24", "1.4") <= 0 || compareVersions("1.44", "1.44") != 0 || compareVersions("1.9", "1.10") >= 0 {
		t.Error("versions compare as numbers per part")
	}
}

func TestParseTime(t *testing.T) {
	now := time.Unix(1000, 0)
	for in, want := range map[string]time.Time{
		"1700000000":           time.Unix(1700000000, 0),
		"1700000000.5":         time.Unix(1700000000, 500000000),
		"10m":                  now.Add(-10 * time.Minute),
		"2026-01-02T03:04:05Z": time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	} {
		got, err := parseTime(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := parseTime("yesterday", now); err == nil {
		t.Error("parseTime accepted yesterday")
	}
}

// TestToSpec: Docker's create body becomes the engine's spec; what the
// engine cannot honour is refused naming the field.
func TestToSpec(t *testing.T) {
	s := &server{cfg: Config{DefaultNetwork: "podman"}}
	cfg := &containertypes.Config{Image: "busybox", Env: []string{"A=1", "UNSET"}, StopSignal: "SIGINT",
		ExposedPorts: nat.PortSet{"80/tcp": {}}, Volumes: map[string]struct{}{"/anon": {}}}
	hc := &containertypes.HostConfig{
		Binds:         []string{"/host:/ctr:ro", "named:/data"},
		PortBindings:  nat.PortMap{"80/tcp": {{HostIP: "127.0.0.1", HostPort: "8080"}}},
		NetworkMode:   "default",
		RestartPolicy: containertypes.RestartPolicy{Name: "on-failure", MaximumRetryCount: 3},
		Tmpfs:         map[string]string{"/tmp": "size=1m"},
		LogConfig:     containertypes.LogConfig{Type: "journald", Config: map[string]string{"tag": "web"}},
	}
	spec, err := s.toSpec("/web", cfg, hc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if spec.LogDriver() != "journald" || spec.LogTag() != "web" {
		t.Errorf("log configuration %+v", spec.LogConfiguration)
	}
	if spec.Env["A"] != "1" || len(spec.Env) != 1 || *spec.StopSignal != 2 || spec.RestartPolicy != "on-failure" || *spec.RestartTries != 3 {
		t.Errorf("spec %+v", spec)
	}
	if _, ok := spec.Networks["podman"]; !ok || spec.NetNS.NSMode != core.NetNSBridge {
		t.Errorf("default network mode: %+v %+v", spec.NetNS, spec.Networks)
	}
	if len(spec.PortMappings) != 1 || spec.PortMappings[0].HostPort != 8080 || spec.PortMappings[0].HostIP != "127.0.0.1" {
		t.Errorf("ports %+v", spec.PortMappings)
	}
	if len(spec.Mounts) != 2 || len(spec.Volumes) != 2 || spec.Volumes[1].Dest != "/anon" || !spec.Volumes[1].IsAnonymous {
		t.Errorf("mounts %+v volumes %+v", spec.Mounts, spec.Volumes)
	}

	for field, hc := range map[string]*containertypes.HostConfig{
		"HostConfig.Links":            {Links: []string{"a:b:c"}},
		"HostConfig.UTSMode":          {UTSMode: "container:x"},
		"HostConfig.IpcMode":          {IpcMode: "container:"},
		"HostConfig.LogConfig.Type":   {LogConfig: containertypes.LogConfig{Type: "syslog"}},
		"HostConfig.LogConfig.Config": {LogConfig: containertypes.LogConfig{Type: "journald", Config: map[string]string{"labels": "a"}}},
		"HostConfig.RestartPolicy":    {RestartPolicy: containertypes.RestartPolicy{Name: "no", MaximumRetryCount: 2}},
		"HostConfig.Binds":            {Binds: []string{"/a:relative"}},
		"HostConfig.CgroupParent":     {Resources: containertypes.Resources{CgroupParent: "/mine"}},
	} {
		_, err := s.toSpec("", &containertypes.Config{Image: "busybox"}, hc, nil)
		var fe *core.FieldError
		if !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("%s: error %v, want one naming it", field, err)
		}
	}
}

// TestLinksTranslate: Docker's three link forms, the same links given in
// the host config and the endpoint once, and links outside a network of
// the container's own refused.
func TestLinksTranslate(t *testing.T) {
	s := &server{cfg: Config{DefaultNetwork: "podman"}}
	hc := &containertypes.HostConfig{NetworkMode: "front", Links: []string{"db", "web:site", "/cache:/app/kv"}}
	nc := &networktypes.NetworkingConfig{EndpointsConfig: map[string]*networktypes.EndpointSettings{
		"front": {Links: []string{"web:site", "queue:q"}},
	}}
	spec, err := s.toSpec("app", &containertypes.Config{Image: "busybox"}, hc, nc)
	if err != nil {
		t.Fatal(err)
	}
	want := []core.ContainerLink{{Container: "web", Alias: "site"}, {Container: "queue", Alias: "q"}, {Container: "db", Alias: "db"}, {Container: "cache", Alias: "kv"}}
	if !reflect.DeepEqual(spec.Links, want) {
		t.Errorf("links %+v, want %+v", spec.Links, want)
	}
	for _, bad := range []*containertypes.HostConfig{
		{Links: []string{""}}, {Links: []string{"a:"}}, {Links: []string{"a:b:c"}},
		{NetworkMode: "none", Links: []string{"a"}}, {NetworkMode: "container:x", Links: []string{"a"}},
	} {
		var fe *core.FieldError
		if _, err := s.toSpec("", &containertypes.Config{Image: "busybox"}, bad, nil); !errors.As(err, &fe) || fe.Field != "HostConfig.Links" {
			t.Errorf("%+v: error %v, want one naming HostConfig.Links", bad, err)
		}
	}
}

// TestVersionedPaths: versions outside the range are 400 with Docker's
// message; the route table sees the path without its prefix.
func TestVersionedPaths(t *testing.T) {
	h := NewHandler(nil, Deps{}, Config{})
	for path, want := range map[string]int{"/v1.44/_ping": 200, "/_ping": 200, "/v1.23/_ping": 400, "/v1.45/_ping": 400, "/v1.44/nothing": 404} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != want {
			t.Errorf("GET %s: %d, want %d", path, rec.Code, want)
		}
		if want == 400 && !strings.Contains(rec.Body.String(), `"message":"client version`) {
			t.Errorf("GET %s: body %s", path, rec.Body)
		}
	}
}

// TestRangeCIDR: a lease range shows as Docker's IPRange when it is a CIDR
// block, and as nothing otherwise.
func TestRangeCIDR(t *testing.T) {
	for _, c := range []struct{ start, end, want string }{
		{"10.1.2.128", "10.1.2.255", "10.1.2.128/25"},
		{"10.1.2.0", "10.1.2.255", "10.1.2.0/24"},
		{"10.1.2.7", "10.1.2.7", "10.1.2.7/32"},
		{"10.1.2.129", "10.1.2.255", ""},
		{"10.1.2.128", "10.1.2.200", ""},
		{"fd00::", "fd00::ff", "fd00::/120"},
		{"10.1.2.0", "fd00::ff", ""},
	} {
		lr := &core.LeaseRange{StartIP: net.ParseIP(c.start), EndIP: net.ParseIP(c.end)}
		if got := rangeCIDR(lr); got != c.want {
			t.Errorf("rangeCIDR(%s-%s) = %q, want %q", c.start, c.end, got, c.want)
		}
	}
	if got := rangeCIDR(&core.LeaseRange{StartIP: net.ParseIP("10.1.2.3")}); got != "" {
		t.Errorf("a range without an end: %q", got)
	}
}

// TestEventActionNames: the engine's event actions in Docker's words and
// back (for filters).
func TestEventActionNames(t *testing.T) {
	for _, tt := range []struct{ typ, engine, docker string }{
		{"container", "died", "die"}, {"container", "remove", "destroy"}, {"container", "start", "start"},
		{"network", "remove", "destroy"}, {"network", "create", "create"}, {"network", "connect", "connect"},
		{"volume", "remove", "destroy"}, {"image", "remove", "delete"}, {"image", "loadfromarchive", "load"},
		{"image", "untag", "untag"}, {"image", "pull", "pull"},
	} {
		if got, ok := dockerAction(tt.typ, tt.engine, ""); !ok || got != tt.docker {
			t.Errorf("%s %s: %q %v, want %q", tt.typ, tt.engine, got, ok, tt.docker)
		}
		if got := engineAction(tt.docker); got != tt.engine {
			t.Errorf("filter %s: %q, want %q", tt.docker, got, tt.engine)
		}
	}
	if _, ok := dockerAction("container", "cleanup", ""); ok {
		t.Error("the engine's cleanup step reached Docker's events")
	}
}

// TestVolumeSubpathTranslate: HostConfig.Mounts' VolumeOptions.Subpath
// becomes the named volume's SubPath; one that is not relative and
// lexically inside, one on an anonymous volume, and a volume driver other
// than local are 400s naming HostConfig.Mounts, as dockerd refuses them.
func TestVolumeSubpathTranslate(t *testing.T) {
	hc := func(src, sub, driver string) *containertypes.HostConfig {
		vo := &mount.VolumeOptions{Subpath: sub}
		if driver != "" {
			vo.DriverConfig = &mount.Driver{Name: driver}
		}
		return &containertypes.HostConfig{Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: src, Target: "/d", VolumeOptions: vo}}}
	}
	var spec core.ContainerSpec
	if err := storageMounts(&spec, &containertypes.Config{}, hc("data", "conf/app.conf", "local")); err != nil {
		t.Fatal(err)
	}
	if len(spec.Volumes) != 1 || spec.Volumes[0].Name != "data" || spec.Volumes[0].SubPath != "conf/app.conf" {
		t.Errorf("volumes: %+v", spec.Volumes)
	}
	withOpts := hc("data", "", "local")
	withOpts.Mounts[0].VolumeOptions.DriverConfig.Options = map[string]string{"type": "tmpfs"}
	withLabels := hc("data", "", "")
	withLabels.Mounts[0].VolumeOptions.Labels = map[string]string{"a": "b"}
	for _, bad := range []*containertypes.HostConfig{hc("data", "/abs", ""), hc("data", "../up", ""), hc("data", "a/../../up", ""), hc("", "sub", ""), hc("data", "", "nfs-plugin"), withOpts, withLabels} {
		var fe *core.FieldError
		if err := storageMounts(&core.ContainerSpec{}, &containertypes.Config{}, bad); !errors.As(err, &fe) || fe.Field != "HostConfig.Mounts" {
			t.Errorf("%+v: %v, want a 400 naming HostConfig.Mounts", bad.Mounts[0].VolumeOptions, err)
		}
	}
}

// TestBuildLimitsTranslate: docker build's --ulimit reaches the RUN steps;
// --cpu-shares, --memory-swap, --cgroup-parent and --security-opt, which
// the builder cannot honour, are 400s naming them rather than ignored.
func TestBuildLimitsTranslate(t *testing.T) {
	opts, err := buildOptions(&query{v: url.Values{"ulimits": {`[{"Name":"nofile","Hard":200,"Soft":100}]`}, "memswap": {"0"}, "cpushares": {"0"}}})
	if err != nil || len(opts.Ulimits) != 1 || opts.Ulimits[0] != "nofile=100:200" {
		t.Fatalf("ulimits: %v %v", opts.Ulimits, err)
	}
	for name, value := range map[string]string{"cpushares": "512", "memswap": "-1", "cgroupparent": "/x", "securityopt": "seccomp=unconfined", "ulimits": "[1]"} {
		var fe *core.FieldError
		if _, err := buildOptions(&query{v: url.Values{name: {value}}}); !errors.As(err, &fe) || fe.Field != name {
			t.Errorf("%s=%s: %v, want a 400 naming it", name, value, err)
		}
	}
}

// TestBindOptionsTranslate: --mount type=bind,bind-nonrecursive binds the
// source alone; bind-create-src and bind-recursive=readonly, which the
// engine cannot honour, are 400s naming HostConfig.Mounts (they were
// ignored before).
func TestBindOptionsTranslate(t *testing.T) {
	hc := func(bo *mount.BindOptions) *containertypes.HostConfig {
		return &containertypes.HostConfig{Mounts: []mount.Mount{{Type: mount.TypeBind, Source: "/srv", Target: "/d", BindOptions: bo}}}
	}
	var spec core.ContainerSpec
	if err := storageMounts(&spec, &containertypes.Config{}, hc(&mount.BindOptions{NonRecursive: true})); err != nil || spec.Mounts[0].Options[0] != "bind" {
		t.Fatalf("bind-nonrecursive: %+v %v", spec.Mounts, err)
	}
	spec = core.ContainerSpec{}
	if err := storageMounts(&spec, &containertypes.Config{}, hc(nil)); err != nil || spec.Mounts[0].Options[0] != "rbind" {
		t.Fatalf("a plain bind: %+v %v", spec.Mounts, err)
	}
	for _, bo := range []*mount.BindOptions{{CreateMountpoint: true}, {ReadOnlyForceRecursive: true}} {
		var fe *core.FieldError
		if err := storageMounts(&core.ContainerSpec{}, &containertypes.Config{}, hc(bo)); !errors.As(err, &fe) || fe.Field != "HostConfig.Mounts" {
			t.Errorf("%+v: %v", bo, err)
		}
	}
}

// TestDockerTmpfsOptions: dockerd's defaults (noexec, nosuid, nodev, an
// empty tmpfs) complete a request's options without overriding what it
// chose, and inspect shows the request's own options back.
func TestDockerTmpfsOptions(t *testing.T) {
	for _, tt := range []struct {
		in   []string
		want string
		view string
	}{
		{nil, "noexec,nosuid,nodev,notmpcopyup", ""},
		{[]string{"size=1m"}, "noexec,nosuid,nodev,size=1m,notmpcopyup", "size=1m"},
		{[]string{"exec", "mode=1777"}, "nosuid,nodev,exec,mode=1777,notmpcopyup", "exec,mode=1777"},
		{[]string{"suid", "dev", "noexec"}, "suid,dev,noexec,notmpcopyup", "suid,dev"},
		{[]string{"tmpcopyup"}, "noexec,nosuid,nodev,tmpcopyup", ""},
		{[]string{"ro"}, "noexec,nosuid,nodev,ro,notmpcopyup", "ro"},
	} {
		got := dockerTmpfs(tt.in)
		if strings.Join(got, ",") != tt.want {
			t.Errorf("dockerTmpfs(%q) = %q, want %q", tt.in, got, tt.want)
		}
		// What the engine shows (rw and rprivate added), as inspect shows it.
		shown := dockerTmpfsView(map[string]string{"/t": strings.Join(append(got, "rw", "rprivate"), ",")})
		if shown["/t"] != tt.view {
			t.Errorf("the view of %q = %q, want %q", got, shown["/t"], tt.view)
		}
	}
}

// TestDockerBinds: binds shown in the -v words Docker's create takes.
func TestDockerBinds(t *testing.T) {
	got := dockerBinds([]string{"/a:/b:rbind,ro", "/c:/d:rw,rprivate,rbind", "vol:/e", "/f:/g:rshared,rbind,Z,nosuid", "vol2:/h:nocopy"})
	want := []string{"/a:/b:ro", "/c:/d", "vol:/e", "/f:/g:rshared,Z", "vol2:/h:nocopy"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("dockerBinds = %q, want %q", got, want)
	}
	if dockerBinds(nil) != nil {
		t.Error("no binds became a list")
	}
}
