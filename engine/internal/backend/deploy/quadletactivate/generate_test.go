package quadletactivate

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/backend/deploy/quadlets"
	"github.com/berth-project/berth/engine/internal/backend/platform/state"
	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/testsupport/need"
	"github.com/berth-project/berth/engine/internal/testsupport/systemdexec"
	"github.com/berth-project/berth/engine/internal/testsupport/tartest"
	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
)

// installUnit installs one quadlet (name -> content pairs, the unit
// first) into store.
func installUnit(t *testing.T, store *quadlets.Store, files ...string) {
	t.Helper()
	if _, err := store.Install(context.Background(), bytes.NewReader(tartest.Of(t, files...)), core.QuadletInstallOptions{}); err != nil {
		t.Fatal(err)
	}
}

const genURL = "tcp://127.0.0.1:8080"

// TestGenerateServices: the service of every kind, with references
// between units, as text (each case lists lines or fragments the service
// must hold and must not), then systemd-analyze verify of all of them
// together, so every Requires=/BindsTo=/Wants= resolves to a generated
// service.
func TestGenerateServices(t *testing.T) {
	testdeadline.Set(t, testdeadline.Default)
	dir := t.TempDir()
	store, err := quadlets.Open(filepath.Join(dir, "q"))
	if err != nil {
		t.Fatal(err)
	}
	q := filepath.Join(dir, "q")
	podman := "/usr/bin/podman --url " + genURL
	installUnit(t, store, "db.network", "[Unit]\nDescription=db net\n[Network]\nSubnet=10.89.7.0/24\nGateway=10.89.7.1\nLabel=a=b\nOptions=mtu=1400\nInternal=true\nIPv6=true\nDisableDNS=true\nDriver=bridge\n[Quadlet]\nDefaultDependencies=false\n")
	installUnit(t, store, "data.volume", "[Volume]\nVolumeName=data\nLabel=x=\"y z\"\nDevice=tmpfs\nType=tmpfs\nOptions=size=1m\n[Service]\nRemainAfterExit=no\n")
	installUnit(t, store, "base.image", "[Image]\nImage=docker.io/library/busybox:latest\nImageTag=localhost/tagged:1\nPolicy=missing\nArch=amd64\nTLSVerify=false\n")
	installUnit(t, store, "pulled.image", "[Image]\nImage=docker.io/library/alpine:3\nAllTags=false\nServiceName=alpine-pull\n")
	installUnit(t, store, "local.image", "[Image]\nImage=localhost/only:1\nPolicy=never\n")
	installUnit(t, store, "app.build", "[Build]\nImageTag=localhost/app:1\nFile=Containerfile\nBuildArg=A=1\nLabel=l=1\nAnnotation=an=1\nTarget=final\nPull=never\nArch="+runtime.GOARCH+"\n[Unit]\nAfter=base.image\nRequires=base.image\n",
		"Containerfile", "FROM localhost/tagged:1\n")
	installUnit(t, store, "web.pod", "[Pod]\nPodName=web\nPublishPort=127.0.0.1:8080:80\nNetwork=db.network\nLabel=tier=web\nHostName=webhost\nDNS=10.0.0.53\nAddHost=h:10.0.0.9\n[Install]\nWantedBy=multi-user.target\n")
	installUnit(t, store, "m.container", "[Container]\nImage=app.build\nPod=web.pod\nVolume=data.volume:/d\n[Service]\nKillMode=control-group\n")
	installUnit(t, store, "solo.container", "[Container]\nImage=pulled.image\nNetwork=db.network\nTimezone=Europe/Berlin\n[Unit]\nWants=web.pod\n[X-Custom]\nNote=kept\n")
	installUnit(t, store, "k.kube", "[Kube]\nYaml=app/k.yaml\nNetwork=db.network\nKubeDownForce=false\n[Service]\nType=oneshot\n[Install]\nWantedBy=default.target\n", "app/k.yaml", "apiVersion: v1\n")

	for _, c := range []struct {
		name, service string
		has, lacks    []string
	}{
		{"db.network", "db-network.service", []string{
			"[Unit]\nSourcePath=" + q + "/db.network/db.network\nDescription=db net\n",
			"[X-Network]\nSubnet=10.89.7.0/24\n", "[X-Quadlet]\nDefaultDependencies=false\n",
			"[Service]\nType=oneshot\nRemainAfterExit=yes\nSyslogIdentifier=%N\n",
			`ExecStart=/bin/sh -c "` + podman + " network exists systemd-db || exec " + podman +
				" network create --driver bridge --internal --ipv6 --disable-dns --subnet 10.89.7.0/24 --gateway 10.89.7.1 --opt mtu=1400 --label a=b systemd-db\"\n",
		}, []string{"network-online.target", "ExecStop"}},
		{"data.volume", "data-volume.service", []string{
			"Wants=network-online.target\nAfter=network-online.target\n",
			"Type=oneshot\nSyslogIdentifier=%N\n",
			`ExecStart=/bin/sh -c "` + podman + " volume exists data || exec " + podman +
				" volume create --opt device=tmpfs --opt o=size=1m --opt type=tmpfs --label 'x=y z' data\"\n",
			"RemainAfterExit=no\n",
		}, []string{"RemainAfterExit=yes"}},
		{"base.image", "base-image.service", []string{
			"Type=oneshot\nRemainAfterExit=yes\n",
			`ExecStart=/bin/sh -c "` + podman + " image exists docker.io/library/busybox:latest || exec " + podman +
				" image pull --arch amd64 --tls-verify=false docker.io/library/busybox:latest\"\n",
			"ExecStartPost=" + podman + " tag docker.io/library/busybox:latest localhost/tagged:1\n",
		}, nil},
		{"pulled.image", "alpine-pull.service", []string{
			"ExecStart=" + podman + " image pull docker.io/library/alpine:3\n",
		}, []string{"ExecStartPost", "/bin/sh"}},
		{"local.image", "local-image.service", []string{
			"ExecStart=" + podman + " image exists localhost/only:1\n",
		}, []string{"pull"}},
		{"app.build", "app-build.service", []string{
			"After=base-image.service\nRequires=base-image.service\n",
			"[Service]\nType=oneshot\nSyslogIdentifier=%N\n",
			"ExecStart=" + podman + " build --pull=never --arch " + runtime.GOARCH + " --target final --tag localhost/app:1 --label l=1 --annotation an=1 --build-arg A=1 --file " +
				q + "/app.build/Containerfile " + q + "/app.build\n",
		}, []string{"RemainAfterExit"}},
		{"web.pod", "web-pod.service", []string{
			"Requires=db-network.service\nAfter=db-network.service\nWants=m.service\nBefore=m.service\n",
			"Environment=PODMAN_SYSTEMD_UNIT=%n\nType=simple\nRestart=on-failure\n",
			"ExecStartPre=" + podman + " pod create --replace --exit-policy stop --publish 127.0.0.1:8080:80/tcp --label tier=web --network systemd-db --dns 10.0.0.53 --add-host h:10.0.0.9 --hostname webhost --infra-name web-infra --name web\n",
			"ExecStartPre=" + podman + " pod start web\n",
			"ExecStart=" + podman + " wait web-infra\n",
			"ExecStop=-" + podman + " pod stop --time=10 web\n",
			"ExecStopPost=-" + podman + " pod rm --force web\n",
			"[Install]\nWantedBy=multi-user.target\n",
		}, []string{"solo.service"}},
		{"m.container", "m.service", []string{
			"Requires=app-build.service\nAfter=app-build.service\nBindsTo=web-pod.service\nAfter=web-pod.service\nRequires=data-volume.service\nAfter=data-volume.service\n",
			"ExecStart=" + podman + " run --name systemd-m --replace --rm --pull missing --volume data:/d --pod web localhost/app:1\n",
			"KillMode=control-group\n",
		}, []string{"KillMode=mixed", "Requires=web-pod.service"}},
		{"solo.container", "solo.service", []string{
			"Requires=alpine-pull.service\nAfter=alpine-pull.service\nRequires=db-network.service\n",
			"Wants=web-pod.service\n", "[X-Custom]\nNote=kept\n",
			"--network systemd-db --tz Europe/Berlin docker.io/library/alpine:3\n",
		}, nil},
		{"k.kube", "k.service", []string{
			"Requires=db-network.service\nAfter=db-network.service\n",
			"Environment=PODMAN_SYSTEMD_UNIT=%n\nKillMode=mixed\nRemainAfterExit=yes\nSyslogIdentifier=%N\n",
			"ExecStart=" + podman + " kube play --replace --network systemd-db " + q + "/k.kube/app/k.yaml\n",
			"ExecStopPost=" + podman + " kube down " + q + "/k.kube/app/k.yaml\n",
			"Type=oneshot\n\n[Install]\nWantedBy=default.target\n",
		}, []string{"--force"}},
	} {
		service, err := GenerateService(store, c.name, genURL)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		file, _ := store.UnitFile(c.name)
		if got := ServiceUnitName(file); got != c.service {
			t.Errorf("%s: service %s, want %s", c.name, got, c.service)
		}
		for _, want := range c.has {
			if !strings.Contains(service, want) {
				t.Errorf("%s lacks %q:\n%s", c.name, want, service)
			}
		}
		for _, bad := range c.lacks {
			if strings.Contains(service, bad) {
				t.Errorf("%s holds %q:\n%s", c.name, bad, service)
			}
		}
	}
	verifyGenerated(t, store, filepath.Join(dir, "units"))
}

// verifyGenerated writes the services of every installed unit into dir
// and has systemd-analyze verify them together.
func verifyGenerated(t *testing.T, store *quadlets.Store, dir string) {
	t.Helper()
	analyze := need.Program(t, "unit verification", "systemd-analyze")
	list, err := store.List(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(dir, 0o755)
	var files []string
	for _, q := range list {
		service, err := GenerateService(store, q.Name, genURL)
		if err != nil {
			t.Fatalf("%s: %v", q.Name, err)
		}
		file := filepath.Join(dir, q.UnitName)
		if err := os.WriteFile(file, []byte(service), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, file)
	}
	if out, err := exec.Command(analyze, append([]string{"verify"}, files...)...).CombinedOutput(); err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestGenerateServiceRefusals: what a generated service cannot carry is
// refused with file, line, section and key (ErrInvalidArgument: 400).
func TestGenerateServiceRefusals(t *testing.T) {
	testdeadline.Set(t, testdeadline.Default)
	store, err := quadlets.Open(filepath.Join(t.TempDir(), "q"))
	if err != nil {
		t.Fatal(err)
	}
	installUnit(t, store, "ok.network", "[Network]\n")
	for _, c := range []struct{ name, unit, want string }{
		{"n1.network", "[Network]\nDNS=10.0.0.53\n", "n1.network line 2: [Network] key DNS: cannot be expressed with podman 4.3.1's remote client, which the generated service runs: its network create has no --dns"},
		{"n2.network", "[Network]\nInterfaceName=br9\n", "n2.network line 2: [Network] key InterfaceName: cannot be expressed"},
		{"n3.network", "[Network]\nIPRange=10.0.0.0/28\n", "n3.network line 2: [Network] key IPRange: not supported in a generated service"},
		{"k1.kube", "[Kube]\nYaml=k.yaml\nPublishPort=8080:80\n", "k1.kube line 3: [Kube] key PublishPort: cannot be expressed with podman 4.3.1's remote client, which the generated service runs: its kube play has no --publish"},
		{"k2.kube", "[Kube]\nYaml=k.yaml\nKubeDownForce=true\n", "k2.kube line 3: [Kube] key KubeDownForce: cannot be expressed"},
		{"i1.image", "[Image]\nImage=x\nPolicy=newer\n", "i1.image line 3: [Image] key Policy: Policy=newer cannot be expressed"},
		{"i2.image", "[Image]\nImage=x\nAllTags=true\nPolicy=missing\n", "i2.image line 4: [Image] key Policy: Policy=missing cannot be checked for every tag"},
		{"c1.container", "[Container]\nImage=x\nNotify=true\n", "c1.container line 3: [Container] key Notify: podman's remote client cannot pass"},
		{"c2.container", "[Container]\nImage=x\nRetry=3\n", "c2.container line 3: [Container] key Retry: not supported in a generated service"},
		{"c7.container", "[Container]\nImage=x\nMount=type=volume,source=v,destination=/d,subpath=sub\n", "c7.container line 3: [Container] key Mount: cannot be expressed with podman 4.3.1's remote client, which the generated service runs: its --mount has no subpath"},
		{"c3.container", "[Container]\nImage=x\n[Service]\nExecStart=/bin/true\n", "c3.container line 4: [Service] key ExecStart: set by the generated service"},
		{"c4.container", "[Container]\nImage=x\n[Service]\nKillMode=process\n", "c4.container line 4: [Service] key KillMode: KillMode=process"},
		{"c5.container", "[Container]\nImage=x\n[Unit]\nAfter=ok.network missing.network\n", "c5.container line 4: [Unit] key After: names missing.network, which is not installed"},
		{"c6.container", "[Container]\nImage=x\nNetwork=missing.network\n", "c6.container line 3: [Container] key Network: references missing.network, which is not installed"},
		{"v1.volume", "[Volume]\n[Service]\nType=simple\n", "v1.volume line 3: [Service] key Type: the generated service of a .volume unit is Type=oneshot"},
		{"b1.build", "[Build]\nImageTag=x\nSetWorkingDirectory=unit\nArch=" + otherArch() + "\n", "b1.build line 4: [Build] key Arch: Arch=" + otherArch() + ": the engine builds for its own architecture only"},
		{"p1.pod", "[Pod]\n[Service]\nPIDFile=/run/p.pid\n", "p1.pod line 3: [Service] key PIDFile: set by the generated service"},
		{"v2.volume", "[Volume]\n[Service]\nRestart=always\n", "v2.volume line 3: [Service] key Restart: Restart=always: systemd does not allow it for a Type=oneshot service"},
	} {
		files := []string{c.name, c.unit}
		if strings.HasSuffix(c.name, ".kube") {
			files = append(files, "k.yaml", "apiVersion: v1\n")
		}
		installUnit(t, store, files...)
		_, err := GenerateService(store, c.name, genURL)
		if err == nil || !errors.Is(err, core.ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a 400 with %q", c.name, err, c.want)
		}
	}
}

// TestGenerateRegeneratesPod: handing a pod member to systemd regenerates
// its pod's service when systemd has it (its Wants=/Before= list the
// members), and only then.
func TestGenerateRegeneratesPod(t *testing.T) {
	testdeadline.Set(t, testdeadline.Default)
	dir := t.TempDir()
	store, err := quadlets.Open(filepath.Join(dir, "q"))
	if err != nil {
		t.Fatal(err)
	}
	installUnit(t, store, "web.pod", "[Pod]\n")
	installUnit(t, store, "a.container", "[Container]\nImage=x\nPod=web.pod\n")
	m := &Manager{o: Options{Store: store, Systemd: Systemd{UnitDir: filepath.Join(dir, "units"), EngineURL: genURL}}}
	got, err := m.generate("a.container")
	if err != nil || len(got) != 1 || got["a.service"] == "" {
		t.Fatalf("without the pod's service: %v, %v", keysOf(got), err)
	}
	os.MkdirAll(m.o.Systemd.UnitDir, 0o755)
	os.WriteFile(filepath.Join(m.o.Systemd.UnitDir, "web-pod.service"), []byte("[Service]\nExecStart=/bin/true\n"), 0o644)
	got, err = m.generate("a.container")
	if err != nil || len(got) != 2 || !strings.Contains(got["web-pod.service"], "Wants=a.service\nBefore=a.service\n") {
		t.Fatalf("with the pod's service: %v, %v\n%s", keysOf(got), err, got["web-pod.service"])
	}
	if m.podOf("web.pod") != "" || m.podOf("a.container") != "web.pod" {
		t.Fatal("podOf")
	}
}

func keysOf(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// otherArch is an architecture this host is not.
func otherArch() string {
	if runtime.GOARCH == "arm64" {
		return "amd64"
	}
	return "arm64"
}

// FuzzGenerateService: generating the service of any unit the installer
// accepts never panics, a refusal names the unit's file, and a generated
// service has ExecStart lines, each reading back as systemd reads it and
// starting podman or sh.
func FuzzGenerateService(f *testing.F) {
	f.Add(".container", "[Container]\nImage=x\nPublishPort=[::1]:80:80/udp\nEnvironment=\"A=b c\" B=$x%y\nLabel=l=\"it's\"\n[Unit]\nAfter=a.network\n")
	f.Add(".network", "[Network]\nSubnet=10.1.0.0/24\nGateway=10.1.0.1\nOptions=mtu=1400\nLabel=a=\"b c\"\n")
	f.Add(".volume", "[Volume]\nVolumeName=v\nLabel=x=\"$y 'z'\"\n[Service]\nRemainAfterExit=no\n")
	f.Add(".image", "[Image]\nImage=a/b:c\nImageTag=d\nPolicy=missing\nTLSVerify=false\n")
	f.Add(".pod", "[Pod]\nPublishPort=8080:80\nDNS=1.1.1.1\nHostName=h\n[Install]\nWantedBy=x.target\n")
	f.Add(".kube", "[Kube]\nYaml=k.yaml\nNetwork=n\n")
	f.Add(".build", "[Build]\nImageTag=t\nSetWorkingDirectory=unit\nBuildArg=A=\"1 2\"\n")
	fuzzAcceptedUnits(f, func(t *testing.T, name, data string) {
		store, err := quadlets.Open(filepath.Join(t.TempDir(), "q"))
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg})
		tw.Write([]byte(data))
		tw.Close()
		if _, err := store.Install(context.Background(), &buf, core.QuadletInstallOptions{}); err != nil {
			return
		}
		service, err := GenerateService(store, name, genURL)
		if err != nil {
			if !strings.Contains(err.Error(), name) {
				t.Fatalf("refusal %q does not name %s", err, name)
			}
			return
		}
		starts := 0
		for _, line := range strings.Split(service, "\n") {
			v, ok := strings.CutPrefix(line, "ExecStart=")
			if !ok {
				continue
			}
			words, err := systemdexec.Split(v)
			if err != nil || len(words) == 0 || (words[0] != podmanBinary && words[0] != "/bin/sh") {
				t.Fatalf("ExecStart=%s reads back as %q, %v", v, words, err)
			}
			starts++
		}
		if starts == 0 {
			t.Fatalf("no ExecStart:\n%s", service)
		}
	})
}

// TestReplaceDropsRenamedService: replacing a unit handed to systemd whose
// ServiceName= changed removes the old service file, so systemd is not
// left with a service for a unit that no longer exists.
func TestReplaceDropsRenamedService(t *testing.T) {
	testdeadline.Set(t, testdeadline.Default)
	dir := t.TempDir()
	store, err := quadlets.Open(filepath.Join(dir, "q"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := state.Open(context.Background(), filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	runDir := filepath.Join(dir, "run-systemd")
	os.MkdirAll(runDir, 0o755)
	reloads := 0
	m := &Manager{o: Options{Store: store, Records: db, Systemd: Systemd{
		UnitDir: filepath.Join(dir, "units"), RunDir: runDir, EngineURL: genURL,
		Reload: func() error { reloads++; return nil },
	}}}
	install := func(body string, replace bool) error {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		tw.WriteHeader(&tar.Header{Name: "web.container", Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
		tw.Write([]byte(body))
		tw.Close()
		_, err := m.Install(context.Background(), &buf, core.QuadletInstallOptions{ReloadSystemd: true, Replace: replace})
		return err
	}
	if err := install("[Container]\nImage=x\n[Service]\n", false); err != nil {
		t.Fatal(err)
	}
	if !m.o.Systemd.has("web.service") {
		t.Fatal("web.service was not written")
	}
	if err := install("[Container]\nImage=x\nServiceName=front\n", true); err != nil {
		t.Fatal(err)
	}
	if m.o.Systemd.has("web.service") || !m.o.Systemd.has("front.service") {
		t.Fatalf("after the rename: web.service kept %v, front.service written %v", m.o.Systemd.has("web.service"), m.o.Systemd.has("front.service"))
	}
	if reloads != 2 {
		t.Fatalf("systemd reloaded %d times, want 2", reloads)
	}
}
