package quadletsapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/deploy/quadletactivate"
	"github.com/berth-project/berth/engine/internal/backend/deploy/quadlets"
	"github.com/berth-project/berth/engine/internal/backend/images/imagestore/registrytest"
	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/systemdexec"
)

// execLines answers the command lines of key (ExecStart, ExecStop ...) in
// a generated service's [Service] section, read as systemd reads them:
// a leading "-" (failure ignored) dropped, words split on whitespace with
// double quotes grouping and backslashes escaping, %% and $$ made single.
func execLines(t *testing.T, service, key string) [][]string {
	t.Helper()
	var out [][]string
	inService := false
	for _, line := range strings.Split(service, "\n") {
		if strings.HasPrefix(line, "[") {
			inService = line == "[Service]"
			continue
		}
		v, ok := strings.CutPrefix(line, key+"=")
		if !inService || !ok {
			continue
		}
		words, err := systemdexec.Split(v)
		if err != nil {
			t.Fatalf("%s line does not read back: %q: %v", key, v, err)
		}
		out = append(out, words)
	}
	return out
}

// runLines runs the command lines of key in service, each within 2
// minutes, and fails the test on the first that fails.
func runLines(t *testing.T, service, key string) {
	t.Helper()
	lines := execLines(t, service, key)
	if len(lines) == 0 {
		t.Fatalf("the service has no %s:\n%s", key, service)
	}
	for _, words := range lines {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		out, err := exec.CommandContext(ctx, words[0], words[1:]...).CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%s %q: %v\n%s", key, words, err, out)
		}
	}
}

// TestGeneratedServicesRun generates the services of a .network, .volume,
// two .image (a present image with Policy=missing and ImageTag; a pull
// from a real registry on 127.0.0.1), a .build, a .pod with a member
// .container, and a .kube, has systemd-analyze verify them together (the
// Requires=/BindsTo= between them resolve), and runs their commands with
// podman 4.3.1's remote client against a real engine, as systemd would:
// each object appears, the oneshot starts succeed a second time (the
// exists check standing in for --ignore), the pod's service main process
// waits on the pod and returns when the service stops it, and the stop
// commands remove what the starts made.
func TestGeneratedServicesRun(t *testing.T) {
	te := startEngine(t)
	te.Load(enginetest.BusyboxImage())
	if _, err := os.Stat("/usr/bin/podman"); err != nil {
		if os.Getenv("BERTH_TEST_STRICT") == "1" {
			t.Fatal("/usr/bin/podman is not installed (BERTH_TEST_STRICT=1)")
		}
		t.Skip("/usr/bin/podman is not installed")
	}
	registrytest.Require(t)
	reg := registrytest.Start(t, registrytest.Options{})
	pulled := reg.Host + "/qsvc/busybox:1"
	te.Must(http.StatusOK, "POST", "/images/localhost/busybox:latest/push?tlsVerify=false&destination="+url.QueryEscape(pulled), nil)
	t.Cleanup(func() {
		te.Do("DELETE", "/pods/qsvc-pod?force=true", nil)
		te.Do("DELETE", "/pods/qsvc-kpod?force=true", nil)
		te.Do("DELETE", "/volumes/qsvc-data?force=true", nil)
		te.Do("DELETE", "/networks/qsvc-net?force=true", nil)
	})

	dir := t.TempDir()
	store, err := quadlets.Open(filepath.Join(dir, "quadlets"))
	if err != nil {
		t.Fatal(err)
	}
	for _, files := range [][]string{
		{"qsvc.network", "[Network]\nNetworkName=qsvc-net\nLabel=app=qsvc\nOptions=mtu=1400\n"},
		{"qsvc.volume", "[Volume]\nVolumeName=qsvc-data\nLabel=app=\"it's $HOME\"\n"},
		{"qsvc.image", "[Image]\nImage=localhost/busybox:latest\nImageTag=localhost/qsvc-tagged:1\nPolicy=missing\n"},
		{"qsvc-reg.image", "[Image]\nImage=" + pulled + "\nTLSVerify=false\n"},
		{"qsvc.build", "[Build]\nImageTag=localhost/qsvc-built:1\nFile=Containerfile\nBuildArg=GREETING=built\nLabel=stage=qsvc\nPull=never\nArch=" + runtime.GOARCH + "\n[Unit]\nAfter=qsvc.image\n",
			"Containerfile", "FROM localhost/qsvc-tagged:1\nARG GREETING\nLABEL greeting=$GREETING\n"},
		{"qsvc.pod", "[Pod]\nPodName=qsvc-pod\nLabel=app=qsvc\n"},
		{"qsvc-member.container", "[Container]\nImage=qsvc.build\nContainerName=qsvc-member\nPod=qsvc.pod\nVolume=qsvc.volume:/data\nExec=sleep 1000\nStopTimeout=1\n"},
		{"qsvc.kube", "[Kube]\nYaml=qsvc.yaml\nNetwork=qsvc.network\n", "qsvc.yaml", strings.ReplaceAll(bqaKubeYAML, "bqa-kpod", "qsvc-kpod")},
	} {
		if _, err := store.Install(context.Background(), tarOf(t, files...), core.QuadletInstallOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	engineURL := "tcp://" + strings.TrimPrefix(strings.SplitN(te.URL, "/v4", 2)[0], "http://")
	units := filepath.Join(dir, "units")
	os.MkdirAll(units, 0o755)
	services := map[string]string{}
	for _, name := range []string{"qsvc.network", "qsvc.volume", "qsvc.image", "qsvc-reg.image", "qsvc.build", "qsvc.pod", "qsvc-member.container", "qsvc.kube"} {
		service, err := quadletactivate.GenerateService(store, name, engineURL)
		if err != nil {
			t.Fatal(err)
		}
		services[name] = service
		file, _ := store.UnitFile(name)
		if err := os.WriteFile(filepath.Join(units, quadletactivate.ServiceUnitName(file)), []byte(service), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	verifyUnits(t, units)

	for _, name := range []string{"qsvc.network", "qsvc.volume", "qsvc.image"} {
		runLines(t, services[name], "ExecStart")
		runLines(t, services[name], "ExecStart") // exists: nothing to do
	}
	runLines(t, services["qsvc.image"], "ExecStartPost")
	for _, path := range []string{"/networks/qsvc-net", "/volumes/qsvc-data", "/images/localhost/qsvc-tagged:1"} {
		if !te.exists(path) {
			t.Fatalf("%s is missing after its service started", path)
		}
	}
	var net struct {
		Labels  map[string]string `json:"labels"`
		Options map[string]string `json:"options"`
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/networks/qsvc-net/json", nil), &net)
	var vol struct{ Labels map[string]string }
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/volumes/qsvc-data/json", nil), &vol)
	if net.Labels["app"] != "qsvc" || net.Options["mtu"] != "1400" || vol.Labels["app"] != "it's $HOME" {
		t.Fatalf("network labels %v options %v, volume labels %v", net.Labels, net.Options, vol.Labels)
	}

	te.Must(http.StatusNotFound, "GET", "/images/"+pulled+"/exists", nil)
	runLines(t, services["qsvc-reg.image"], "ExecStart")
	te.Must(http.StatusNoContent, "GET", "/images/"+pulled+"/exists", nil)

	runLines(t, services["qsvc.build"], "ExecStart")
	var built struct {
		Config struct{ Labels map[string]string }
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/images/localhost/qsvc-built:1/json", nil), &built)
	if built.Config.Labels["greeting"] != "built" || built.Config.Labels["stage"] != "qsvc" {
		t.Fatalf("built image labels: %v", built.Config.Labels)
	}

	// The pod: create and start, then the main process waits on it.
	runLines(t, services["qsvc.pod"], "ExecStartPre")
	mainLines := execLines(t, services["qsvc.pod"], "ExecStart")
	if len(mainLines) != 1 {
		t.Fatalf("pod ExecStart lines: %q", mainLines)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	podMain := exec.CommandContext(ctx, mainLines[0][0], mainLines[0][1:]...)
	if err := podMain.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- podMain.Wait() }()
	member := execLines(t, services["qsvc-member.container"], "ExecStart")[0]
	memberRun := exec.CommandContext(ctx, member[0], member[1:]...)
	if err := memberRun.Start(); err != nil {
		t.Fatal(err)
	}
	memberDone := make(chan error, 1)
	go func() { memberDone <- memberRun.Wait() }()
	deadline := time.Now().Add(time.Minute)
	for {
		var c struct {
			State struct{ Running bool }
			Pod   string
		}
		if status, body := te.Do("GET", "/containers/qsvc-member/json", nil); status == http.StatusOK {
			json.Unmarshal(body, &c)
		}
		if c.State.Running && c.Pod != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the member container did not run in the pod")
		}
		time.Sleep(200 * time.Millisecond)
	}
	select {
	case err := <-waited:
		t.Fatalf("the pod service's main process ended while the pod runs: %v", err)
	default:
	}
	runLines(t, services["qsvc-member.container"], "ExecStop")
	select {
	case <-memberDone: // podman run ends with the container it ran
	case <-time.After(time.Minute):
		t.Fatal("the member's podman run did not end when its service stopped it")
	}
	runLines(t, services["qsvc.pod"], "ExecStop")
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("the pod service's main process: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the pod service's main process did not end when the pod stopped")
	}
	runLines(t, services["qsvc.pod"], "ExecStopPost")
	if te.exists("/pods/qsvc-pod") || te.exists("/containers/qsvc-member") {
		t.Fatal("the pod or its member outlived the pod service's stop")
	}

	// The kube: played on the network, taken down on stop.
	runLines(t, services["qsvc.kube"], "ExecStart")
	var kpod struct {
		State       string
		InfraConfig struct{ Networks []string }
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/pods/qsvc-kpod/json", nil), &kpod)
	if kpod.State != "Running" || strings.Join(kpod.InfraConfig.Networks, ",") != "qsvc-net" {
		t.Fatalf("the played pod is %q, on networks %v", kpod.State, kpod.InfraConfig.Networks)
	}
	runLines(t, services["qsvc.kube"], "ExecStopPost")
	if te.exists("/pods/qsvc-kpod") {
		t.Fatal("the kube service's stop left the pod")
	}
}
