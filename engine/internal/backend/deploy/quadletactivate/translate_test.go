package quadletactivate

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/backend/deploy/quadlets"
	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/testsupport/need"
)

func TestParsePort(t *testing.T) {
	for _, c := range []struct {
		in   string
		want core.PortMapping
		err  bool
	}{
		{in: "80", want: core.PortMapping{ContainerPort: 80, Protocol: "tcp"}},
		{in: "8080:80", want: core.PortMapping{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}},
		{in: "127.0.0.1:8080:80/udp", want: core.PortMapping{HostIP: "127.0.0.1", HostPort: 8080, ContainerPort: 80, Protocol: "udp"}},
		{in: "127.0.0.1::80", want: core.PortMapping{HostIP: "127.0.0.1", ContainerPort: 80, Protocol: "tcp"}},
		{in: "[::1]:8080:80", want: core.PortMapping{HostIP: "::1", HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}},
		{in: "9000-9002:7000-7002/sctp", want: core.PortMapping{HostPort: 9000, ContainerPort: 7000, Range: 3, Protocol: "sctp"}},
		{in: "9000-9001:7000-7002", err: true},
		{in: "99999:80", err: true},
		{in: "0", err: true},
		{in: "80/icmp", err: true},
		{in: "a:b:c:d", err: true},
		{in: "300.1.1.1:80:80", err: true},
		{in: "[::1:80", err: true},
	} {
		got, err := parsePort(c.in)
		if (err != nil) != c.err || (!c.err && got != c.want) {
			t.Errorf("parsePort(%q) = %+v, %v; want %+v, error %v", c.in, got, err, c.want, c.err)
		}
		if !c.err {
			if back, err := parsePort(formatPort(got)); err != nil || back != got {
				t.Errorf("formatPort(%+v) = %q does not read back: %+v, %v", got, formatPort(got), back, err)
			}
		}
	}
}

func TestSplitWords(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
		err  bool
	}{
		{in: `a b  c`, want: []string{"a", "b", "c"}},
		{in: `A="x y" B='z' C=w\ v`, want: []string{"A=x y", "B=z", "C=w v"}},
		{in: `sh -c "echo \"hi\""`, want: []string{"sh", "-c", `echo "hi"`}},
		{in: `""`, want: []string{""}},
		{in: `"open`, err: true},
		{in: `x\`, err: true},
	} {
		got, err := splitWords(c.in)
		if (err != nil) != c.err || (!c.err && !reflect.DeepEqual(got, c.want)) {
			t.Errorf("splitWords(%q) = %q, %v; want %q, error %v", c.in, got, err, c.want, c.err)
		}
	}
}

func TestRestartMapping(t *testing.T) {
	for _, c := range []struct{ kind, value, want string }{
		{"Container", "no", "no"}, {"Container", "always", "always"}, {"Container", "on-failure", "on-failure"},
		{"Container", "on-abnormal", ""}, {"Container", "on-success", ""}, {"Container", "on-watchdog", ""},
		{"Container", "on-abort", ""}, {"Container", "sometimes", ""}, {"Network", "no", "no"}, {"Network", "always", ""},
		{"Pod", "on-failure", ""},
	} {
		got, err := quadlets.RestartPolicy(c.kind, c.value)
		if got != c.want || (err != nil) != (c.want == "") {
			t.Errorf("RestartPolicy(%s, %s) = %q, %v; want %q", c.kind, c.value, got, err, c.want)
		}
	}
}

// TestCheck: what activation refuses, each named by file, line and key.
func TestCheck(t *testing.T) {
	for _, c := range []struct{ name, unit, want string }{
		{"a.container", "[Container]\nImage=x\nExec=sleep 1\nVolume=d.volume:/d:ro\nSecret=s,type=env,target=S\n", ""},
		{"a.container", "[Container]\nImage=x\nRootfs=/r\n", "a.container line 3: [Container] key Rootfs: not supported by activation"},
		{"a.container", "[Container]\nImage=x\nNotify=true\n", "a.container line 3: [Container] key Notify"},
		{"a.container", "[Container]\nImage=x\nVolume=rel/dir\n", "destination \"rel/dir\" is not an absolute path"},
		{"a.container", "[Container]\nImage=x\nSecret=s,type=file\n", "type=file: want mount or env"},
		{"a.container", "[Container]\nImage=x\nHealthInterval=5s\n", "needs HealthCmd"},
		{"a.container", "[Container]\nImage=x\nNetwork=n.network:ip=1.2.3.4\n", "network options"},
		{"a.container", "[Container]\nImage=x\nNetwork=none\nNetwork=b\n", "cannot be combined"},
		{"a.container", "[Container]\nImage=x\nNetwork=db.container\n", "a.container line 3: [Container] key Network: \"db.container\": joining another unit's network namespace is not supported"},
		{"k.kube", "[Kube]\nYaml=k.yaml\nNetwork=db.container\n", "k.kube line 3: [Kube] key Network"},
		{"a.container", "[Container]\nImage=x\nNetworkAlias=w\n", "NetworkAlias needs a Network="},
		{"a.container", "[Container]\nImage=x\n[Service]\nTimeoutStartSec=5min\n", ""},
		{"a.container", "[Container]\nImage=x\n[Service]\nRestart=on-abnormal\n", "a.container line 4: [Service] key Restart: Restart=on-abnormal has no engine restart policy"},
		{"p.pod", "[Pod]\n[Service]\nRestart=always\n", "p.pod line 3: [Service] key Restart: Restart=always: only a .container unit is restarted by the engine"},
		{"p.pod", "[Pod]\n[Service]\nRestart=no\n", ""},
		{"a.container", "[Container]\nImage=x\n[Service]\nTimeoutStartSec=soon\n", "not a time span"},
		{"a.container", "[Container]\nImage=x\n[Unit]\nConditionPathExists=/x\n", "[Unit] key ConditionPathExists: not supported by activation"},
		{"a.container", "[Container]\nImage=x\n[Other]\nK=v\n", "section [Other] is not supported"},
		{"a.volume", "[Volume]\nDriver=image\nImage=x\n", "a.volume line 3: [Volume] key Image: not supported by activation"},
		{"n.network", "[Network]\nGateway=10.0.0.1\n", "a Gateway needs a Subnet"},
		{"i.image", "[Image]\nImage=x\nAllTags=true\nImageTag=y\n", "ImageTag cannot name every tag"},
		{"b.build", "[Build]\nImageTag=x\nFile=../../Containerfile\n", "outside the build context"},
		{"b.build", "[Build]\nImageTag=x\nFile=Containerfile\nArch=" + otherArch() + "\n", "b.build line 4: [Build] key Arch: Arch=" + otherArch() + ": the engine builds for its own architecture only"},
	} {
		err := Check(c.name, []byte(c.unit))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s %q: %v", c.name, c.unit, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s %q: %v, want %q", c.name, c.unit, err, c.want)
		}
	}
}

// FuzzCheck: activation's reading of any unit the installer accepts never
// panics, and every refusal names the file.
func FuzzCheck(f *testing.F) {
	f.Add(".container", "[Container]\nImage=x\nPublishPort=[::1]:80:80/udp\nEnvironment=\"A=b c\"\nVolume=v.volume:/d:ro,z\n")
	f.Add(".network", "[Network]\nSubnet=10.1.0.0/24\nGateway=10.1.0.1\nOptions=mtu=1400\n")
	f.Add(".container", "[Container]\nImage=x.image\nSecret=a,type=mount,mode=0400,uid=1\nHealthCmd=true\nHealthRetries=3\n")
	fuzzAcceptedUnits(f, func(t *testing.T, name, data string) {
		if err := Check(name, []byte(data)); err != nil && !strings.Contains(err.Error(), name) {
			t.Fatalf("refusal %q does not name %s", err, name)
		}
	})
}

// fuzzAcceptedUnits fuzzes check with the units the installer accepts: a
// file named fuzz and the extension the fuzzer gives, holding data.
func fuzzAcceptedUnits(f *testing.F, check func(t *testing.T, name, data string)) {
	f.Fuzz(func(t *testing.T, ext, data string) {
		name := "fuzz" + ext
		if len(quadlets.Validate(name, []byte(data))) > 0 {
			return
		}
		check(t, name, data)
	})
}

// TestGenerateService: the service generated for a .container (with
// references to an installed .network and .volume) is accepted by
// systemd-analyze verify and runs podman against the engine with the
// unit's options. generate_test.go covers the other kinds.
func TestGenerateService(t *testing.T) {
	analyze := need.Program(t, "unit verification", "systemd-analyze")
	dir := t.TempDir()
	store, err := quadlets.Open(filepath.Join(dir, "quadlets"))
	if err != nil {
		t.Fatal(err)
	}
	install := func(files ...string) { installUnit(t, store, files...) }
	install("db.network", "[Network]\nNetworkName=dbnet\n")
	install("data.volume", "[Volume]\n")
	install("web.container", `[Unit]
Description=web 100%
[Container]
Image=docker.io/library/nginx:latest
ContainerName=web
Network=db.network
Volume=data.volume:/data:ro
Volume=./site:/site
PublishPort=127.0.0.1:8080:80
Environment=A="x y" B=$HOME
Label=app=web
Secret=token,type=env,target=TOKEN
HealthCmd=curl -f http://localhost/
HealthInterval=30s
Exec=nginx -g "daemon off;"
[Service]
Restart=on-failure
[Install]
WantedBy=multi-user.target
`, "site/index.html", "hi")
	service, err := GenerateService(store, "web.container", "tcp://127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"[X-Container]\nImage=docker.io/library/nginx:latest",
		"Requires=db-network.service\nAfter=db-network.service",
		"ExecStart=/usr/bin/podman --url tcp://127.0.0.1:8080 run --name web --replace --rm --pull missing",
		`--env "A=x y" --env B=$$HOME`, "--network dbnet", "--volume systemd-data:/data:ro",
		"--volume " + filepath.Join(dir, "quadlets", "web.container", "site") + ":/site",
		"--publish 127.0.0.1:8080:80/tcp", "--secret token,type=env,target=TOKEN",
		`--health-cmd "curl -f http://localhost/"`, `docker.io/library/nginx:latest nginx -g "daemon off;"`,
		"ExecStop=/usr/bin/podman --url tcp://127.0.0.1:8080 rm -v -f -i web", "Restart=on-failure", "[Install]\nWantedBy=multi-user.target",
		"Description=web 100%",
	} {
		if !strings.Contains(service, want) {
			t.Errorf("the service lacks %q:\n%s", want, service)
		}
	}
	units := filepath.Join(dir, "units")
	os.MkdirAll(units, 0o755)
	for _, dep := range []string{"db-network.service", "data-volume.service"} {
		os.WriteFile(filepath.Join(units, dep), []byte("[Service]\nType=oneshot\nExecStart=/bin/true\n"), 0o644)
	}
	file := filepath.Join(units, ServiceUnitName(filepath.Join(dir, "quadlets", "web.container", "web.container")))
	if err := os.WriteFile(file, []byte(service), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(analyze, "verify", file).CombinedOutput(); err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s\n%s", err, out, service)
	}
}

// TestTranslateLimits: the resource, signal, log, group, device, masking
// and Mount= keys reach the container's spec, and the podman run line of
// its generated service carries them back; bad values are refused naming
// the line.
func TestTranslateLimits(t *testing.T) {
	unit := "[Container]\nImage=x\nUserNS=auto:size=2048\nMemory=64m\nPidsLimit=50\nShmSize=1m\nUlimit=nofile=100:200\nStopSignal=SIGINT\n" +
		"LogDriver=k8s-file\nLogOpt=max-size=4k\nGroupAdd=wheel\nAddDevice=/dev/null:/dev/n:rw\nAddDevice=-/dev/no-such-device\n" +
		"Mask=/opt/secret\nUnmask=/proc/kcore\nMount=type=tmpfs,destination=/t,tmpfs-size=1m\n" +
		"Mount=type=bind,source=/srv,destination=/srv,ro=true\nMount=type=image,source=tools.image,destination=/tools\n" +
		"Mount=type=volume,source=data.volume,destination=/data,subpath=site/www\n"
	u := parseUnit("l.container", "l.container", []byte(unit))
	p, err := translate(u, dryResolver{})
	if err != nil {
		t.Fatal(err)
	}
	s := p.container
	if s.Resources == nil || *s.Resources.Memory.Limit != 64<<20 || *s.Resources.Pids.Limit != 50 || *s.ShmSize != 1<<20 {
		t.Errorf("limits: %+v shm %v", s.Resources, s.ShmSize)
	}
	if len(s.Rlimits) != 1 || s.Rlimits[0].Type != "RLIMIT_NOFILE" || s.Rlimits[0].Soft != 100 || s.Rlimits[0].Hard != 200 {
		t.Errorf("ulimits: %+v", s.Rlimits)
	}
	if s.UserNS.NSMode != "auto" || s.IDMappings == nil || s.IDMappings.AutoUserNsOpts.Size != 2048 {
		t.Errorf("UserNS=auto:size=2048: %+v %+v", s.UserNS, s.IDMappings)
	}
	if *s.StopSignal != 2 || s.LogConfiguration.Driver != "k8s-file" || s.LogConfiguration.Size != 4096 {
		t.Errorf("stop signal %d, log %+v", *s.StopSignal, s.LogConfiguration)
	}
	if len(s.Devices) != 1 || s.Devices[0].Path != "/dev/null:/dev/n:rw" || len(s.Groups) != 1 || s.Mask[0] != "/opt/secret" || s.Unmask[0] != "/proc/kcore" {
		t.Errorf("devices %+v groups %v mask %v unmask %v", s.Devices, s.Groups, s.Mask, s.Unmask)
	}
	if len(s.Mounts) != 2 || s.Mounts[0].Type != "tmpfs" || s.Mounts[1].Source != "/srv" || !slices.Contains(s.Mounts[1].Options, "ro") ||
		len(s.ImageVolumes) != 1 || s.ImageVolumes[0].Source != "systemd-tools" {
		t.Errorf("mounts %+v image volumes %+v", s.Mounts, s.ImageVolumes)
	}
	if len(s.Volumes) != 1 || s.Volumes[0].Name != "systemd-data" || s.Volumes[0].SubPath != "site/www" {
		t.Errorf("a volume mount with a subpath: %+v", s.Volumes)
	}
	line := strings.Join(runFlags(s), " ")
	for _, want := range []string{"--memory 67108864", "--pids-limit 50", "--shm-size 1048576", "--ulimit nofile=100:200", "--stop-signal 2",
		"--log-driver k8s-file", "--log-opt max-size=4096", "--group-add wheel", "--device /dev/null:/dev/n:rw",
		"--security-opt mask=/opt/secret", "--security-opt unmask=/proc/kcore", "--mount type=image,source=systemd-tools,destination=/tools",
		"--userns auto:size=2048"} {
		if !strings.Contains(line, want) {
			t.Errorf("the generated run line lacks %q: %s", want, line)
		}
	}
	pu := parseUnit("p.pod", "p.pod", []byte("[Pod]\nShmSize=1m\nUserNS=auto:size=1024\n"))
	pp, err := translate(pu, dryResolver{})
	if err != nil || *pp.pod.ShmSize != 1<<20 || pp.pod.UserNS.NSMode != "auto" || pp.pod.IDMappings.AutoUserNsOpts.Size != 1024 {
		t.Errorf("a pod's ShmSize and UserNS: %+v (%v)", pp, err)
	}
	for bad, want := range map[string]string{
		"Memory=lots":                                "key Memory",
		"Ulimit=nofile":                              "key Ulimit",
		"StopSignal=SIGNOPE":                         "key StopSignal",
		"LogOpt=path=/x":                             "key LogOpt",
		"Mask=relative":                              "key Mask",
		"UserNS=keep-id":                             "key UserNS",
		"UserNS=auto:uidmapping=0:1:1":               "key UserNS",
		"Mount=type=devpts,destination=/d":           "mount type \"devpts\"",
		"Mount=type=bind,destination=/d":             "needs a source",
		"Mount=type=volume,destination=rel":          "not an absolute path",
		"Mount=type=bind,source=/a,dst=/b,foo=1":     "mount option \"foo\"",
		"Mount=type=bind,source=/a,dst=/b,subpath=x": "subpath is for volume and image mounts",
		"Mount=type=volume,dst=/b,subpath=x":         "a subpath needs a named volume",
	} {
		if err := Check("b.container", []byte("[Container]\nImage=x\n"+bad+"\n")); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "line 3") {
			t.Errorf("%s: %v, want a refusal naming %q on line 3", bad, err, want)
		}
	}
}
