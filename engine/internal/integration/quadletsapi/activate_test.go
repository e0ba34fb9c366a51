package quadletsapi

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/poll"
)

// quadletStatus lists the quadlets and answers name -> Status.
func (te *testEngine) quadletStatus() map[string]string {
	te.T.Helper()
	var list []struct{ Name, Status string }
	te.Get("/quadlets/json", &list)
	out := map[string]string{}
	for _, q := range list {
		out[q.Name] = q.Status
	}
	return out
}

// exists answers whether GET path/exists is 204.
func (te *testEngine) exists(path string) bool {
	te.T.Helper()
	status, _ := te.Do("GET", path+"/exists", nil)
	return status == http.StatusNoContent
}

const (
	bqaNetwork = "[Unit]\nDescription=bqa network\n[Network]\nLabel=app=bqa\n"
	bqaVolume  = "[Volume]\nLabel=app=bqa\n"
	bqaWeb     = `[Unit]
Description=bqa web server
After=network-online.target
[Container]
Image=localhost/busybox:latest
ContainerName=bqa-web
Network=bqa-net.network
Volume=bqa-data.volume:/data
PublishPort=127.0.0.1:18301:8080
Environment=GREETING="quadlet ok" OTHER=1
EnvironmentFile=web.env
Label=app=bqa
HealthCmd=true
StopTimeout=1
Exec=sh -c "echo $GREETING $FROM_FILE > /data/index.html && exec busybox httpd -f -p 8080 -h /data"
[Service]
Restart=always
TimeoutStartSec=60
[Install]
WantedBy=default.target
`
)

// TestQuadletActivation installs a .network, a .volume and a .container
// that references both with activate=true, reaches the container's web
// server through its published port on 127.0.0.1, checks what each key
// became (restart policy, labels, environment, healthcheck), the listed
// statuses, the 409 of a plain removal and the teardown of a forced one.
func TestQuadletActivation(t *testing.T) {
	te := startEngine(t)

	te.Must(http.StatusOK, "POST", "/quadlets?activate=true", tarOf(t, "bqa-net.network", bqaNetwork))
	te.Must(http.StatusOK, "POST", "/quadlets?activate=true", tarOf(t, "bqa-data.volume", bqaVolume))
	te.Must(http.StatusOK, "POST", "/quadlets?activate=true", tarOf(t, "bqa-web.container", bqaWeb, "web.env", "FROM_FILE=env-file\n"))
	if !te.exists("/networks/systemd-bqa-net") || !te.exists("/volumes/systemd-bqa-data") {
		t.Fatal("the network or the volume was not created with Podman's systemd- names")
	}
	if got := poll.GetWithin(t, 15*time.Second, "http://127.0.0.1:18301/index.html"); strings.TrimSpace(got) != "quadlet ok env-file" {
		t.Fatalf("the container's server answered %q", got)
	}
	var inspect struct {
		Config struct {
			Labels      map[string]string
			Env         []string
			Healthcheck struct{ Test []string }
		}
		HostConfig struct {
			RestartPolicy struct{ Name string }
		}
		NetworkSettings struct{ Networks map[string]any }
		Mounts          []struct{ Name, Destination string }
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/bqa-web/json", nil), &inspect)
	if inspect.HostConfig.RestartPolicy.Name != "always" || inspect.Config.Labels["app"] != "bqa" ||
		len(inspect.Config.Healthcheck.Test) == 0 || inspect.NetworkSettings.Networks["systemd-bqa-net"] == nil ||
		len(inspect.Mounts) != 1 || inspect.Mounts[0].Name != "systemd-bqa-data" {
		t.Fatalf("container as created: %+v", inspect)
	}
	if env := strings.Join(inspect.Config.Env, " "); !strings.Contains(env, "OTHER=1") || !strings.Contains(env, "FROM_FILE=env-file") {
		t.Fatalf("environment: %s", env)
	}
	status := te.quadletStatus()
	if status["bqa-web.container"] != "active/running" || status["bqa-net.network"] != "active/exited" || status["bqa-data.volume"] != "active/exited" {
		t.Fatalf("statuses: %v", status)
	}
	var list []struct{ Name string }
	json.Unmarshal(te.Must(http.StatusOK, "GET", `/quadlets/json?filters={"status":["^active/running$"]}`, nil), &list)
	if len(list) != 1 || list[0].Name != "bqa-web.container" {
		t.Fatalf("status filter: %+v", list)
	}

	// Replacing an active quadlet tears its activation down and activates
	// the new unit: the server moves to the new port.
	te.Must(http.StatusOK, "POST", "/quadlets?activate=true&replace=true", tarOf(t, "bqa-web.container",
		strings.Replace(bqaWeb, "18301", "18302", 1), "web.env", "FROM_FILE=replaced\n"))
	if got := poll.GetWithin(t, 15*time.Second, "http://127.0.0.1:18302/index.html"); strings.TrimSpace(got) != "quadlet ok replaced" {
		t.Fatalf("the replaced container's server answered %q", got)
	}
	if conn, err := net.DialTimeout("tcp", "127.0.0.1:18301", time.Second); err == nil {
		conn.Close()
		t.Fatal("the replaced container's port is still published")
	}

	te.mustFail(http.StatusBadRequest, "DELETE", "/quadlets/bqa-web.container", nil, "is running and force is not set")
	te.mustFail(http.StatusBadRequest, "DELETE", "/quadlets/bqa-net.network", nil, "is running and force is not set")
	te.Must(http.StatusOK, "DELETE", "/quadlets/bqa-web.container?force=true", nil)
	if te.exists("/containers/bqa-web") {
		t.Fatal("the container outlived its quadlet")
	}
	var rm struct {
		Removed []string
		Errors  map[string]string
	}
	json.Unmarshal(te.Must(http.StatusOK, "DELETE", "/quadlets?quadlets=bqa-net.network&quadlets=bqa-data.volume&force=true", nil), &rm)
	if len(rm.Removed) != 2 || len(rm.Errors) != 0 {
		t.Fatalf("batch removal: %+v", rm)
	}
	if te.exists("/networks/systemd-bqa-net") || te.exists("/volumes/systemd-bqa-data") {
		t.Fatal("the network or the volume outlived its quadlet")
	}
	if entries, _ := os.ReadDir(filepath.Join(te.Root, "quadlets")); len(entries) != 0 {
		t.Fatalf("left in the quadlet directory: %v", entries)
	}
}

// TestQuadletPodActivation activates a .container whose Pod= names an
// installed .pod: the pod is activated first (created, started, with the
// port it publishes), the member joins it, and a forced removal of the
// pod's quadlet takes the pod down.
func TestQuadletPodActivation(t *testing.T) {
	te := startEngine(t)
	te.Must(http.StatusOK, "POST", "/quadlets", tarOf(t, "bqa-pod.pod", "[Pod]\nPodName=bqa-pod\nLabel=app=bqa\nShmSize=2m\n"))
	te.Must(http.StatusOK, "POST", "/quadlets?activate=true", tarOf(t, "bqa-member.container",
		"[Container]\nImage=localhost/busybox:latest\nPod=bqa-pod.pod\nExec=sleep 1000\nStopTimeout=1\n[Service]\nRestart=on-failure\n"))
	var pod struct {
		State      string
		Containers []struct{ Name, State string }
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/pods/bqa-pod/json", nil), &pod)
	member := false
	for _, c := range pod.Containers {
		member = member || (c.Name == "systemd-bqa-member" && c.State == "running")
	}
	if pod.State != "Running" || !member {
		t.Fatalf("pod after activation: %+v", pod)
	}
	// ShmSize= sizes the /dev/shm the pod's members share.
	var mi struct{ State struct{ Pid int } }
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/systemd-bqa-member/json", nil), &mi)
	var fs syscall.Statfs_t
	if err := syscall.Statfs("/proc/"+strconv.Itoa(mi.State.Pid)+"/root/dev/shm", &fs); err != nil || fs.Blocks*uint64(fs.Bsize) != 2<<20 {
		t.Errorf("the member's /dev/shm: %d bytes (%v), want the pod's 2 MiB", fs.Blocks*uint64(fs.Bsize), err)
	}
	var inspect struct {
		HostConfig struct{ RestartPolicy struct{ Name string } }
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/systemd-bqa-member/json", nil), &inspect)
	if inspect.HostConfig.RestartPolicy.Name != "on-failure" {
		t.Fatalf("Restart=on-failure became %q", inspect.HostConfig.RestartPolicy.Name)
	}
	if st := te.quadletStatus(); st["bqa-pod.pod"] != "active/running" || st["bqa-member.container"] != "active/running" {
		t.Fatalf("statuses: %v", st)
	}
	te.Must(http.StatusOK, "DELETE", "/quadlets/bqa-pod.pod?force=true", nil)
	if te.exists("/pods/bqa-pod") || te.exists("/containers/systemd-bqa-member") {
		t.Fatal("the pod or its member outlived the pod's quadlet")
	}
	if st := te.quadletStatus(); st["bqa-member.container"] != "inactive/dead" {
		t.Fatalf("the member's quadlet after its pod went: %v", st)
	}
	te.Must(http.StatusOK, "DELETE", "/quadlets/bqa-member.container?force=true", nil)
}

// TestQuadletActivationRefusals sends units activation refuses (400, the
// unit not installed) and one whose activation fails half way: what it
// made (the network it activated as a dependency) is gone, the unit is
// not installed, the dependency's unit stays, inactive.
func TestQuadletActivationRefusals(t *testing.T) {
	te := startEngine(t)
	for _, c := range []struct{ name, unit, want string }{
		{"bad1.container", "[Container]\nImage=localhost/busybox:latest\nNetwork=missing.network\n", "bad1.container line 3: [Container] key Network: references missing.network, which is not installed"},
		{"bad2.container", "[Container]\nImage=localhost/busybox:latest\nRetry=3\n", "bad2.container line 3: [Container] key Retry: not supported by activation"},
		{"bad3.container", "[Container]\nImage=localhost/busybox:latest\n[Service]\nRestart=on-abnormal\n", "bad3.container line 4: [Service] key Restart: Restart=on-abnormal has no engine restart policy"},
		{"bad4.container", "[Container]\nImage=localhost/busybox:latest\nPublishPort=99999:80\n", "bad4.container line 3: [Container] key PublishPort"},
		{"bad5.container", "[Container]\nImage=localhost/busybox:latest\nEnvironment=\"A=1\n", "bad5.container line 3: [Container] key Environment: unterminated quote"},
		{"bad6.network", "[Network]\nSubnet=10.0.0.0/33\n", "bad6.network line 2: [Network] key Subnet"},
		{"bad7.container", "[Container]\nImage=localhost/busybox:latest\n[Service]\nRestartSec=5\n", "bad7.container line 4: [Service] key RestartSec: not supported by activation"},
	} {
		te.mustFail(http.StatusBadRequest, "POST", "/quadlets?activate=true", tarOf(t, c.name, c.unit), c.want)
		te.mustFail(http.StatusNotFound, "GET", "/quadlets/"+c.name+"/exists", nil, "no such quadlet")
	}
	te.mustFail(http.StatusBadRequest, "POST", "/quadlets?activate=true", tarOf(t, "esc.container", "[Container]\nImage=localhost/busybox:latest\n", "../esc.env", "A=1"), "escapes the quadlet directory")
	te.mustFail(http.StatusBadRequest, "POST", "/quadlets?activate=perhaps", tarOf(t, "p.container", "[Container]\nImage=x\n"), "activate")
	te.mustFail(http.StatusBadRequest, "POST", "/quadlets?activate=true", tarOf(t, "bad8.network", "[Network]\n[Service]\nRestart=always\n"), "only a .container unit is restarted")
	te.mustFail(http.StatusBadRequest, "POST", "/quadlets", tarOf(t, "bad9.network", "[Network]\n[Service]\nRestart=sometimes\n"), "bad9.network line 3: [Service] key Restart: Restart=sometimes is not a systemd restart setting")
	te.mustFail(http.StatusBadRequest, "POST", "/quadlets?activate=true&reloadSystemd=true", tarOf(t, "r.container", "[Container]\nImage=x\n"), "reloadSystemd", "no systemd runs here")

	te.Must(http.StatusOK, "POST", "/quadlets", tarOf(t, "bqa-dep.network", "[Network]\n"))
	te.mustFail(http.StatusNotFound, "POST", "/quadlets?activate=true", tarOf(t, "bqa-fail.container",
		"[Container]\nImage=localhost/nope:1\nPull=never\nNetwork=bqa-dep.network\n"), "bqa-fail.container: activation failed, the unit was not installed", "localhost/nope:1")
	if te.exists("/networks/systemd-bqa-dep") {
		t.Fatal("a failed activation left the network it made")
	}
	st := te.quadletStatus()
	if _, ok := st["bqa-fail.container"]; ok || st["bqa-dep.network"] != "Not loaded" {
		t.Fatalf("after the failed activation: %v", st)
	}
}

const bqaKubeYAML = `apiVersion: v1
kind: Pod
metadata:
  name: bqa-kpod
spec:
  containers:
  - name: main
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: ["sleep", "1000"]
`

// TestQuadletKubeActivation activates a .kube unit: its YAML is played
// through the engine's kube player (the pod runs), and a forced removal
// takes the pod down with kube down.
func TestQuadletKubeActivation(t *testing.T) {
	te := startEngine(t)
	te.Must(http.StatusOK, "POST", "/quadlets?activate=true", tarOf(t, "bqa-kube.kube", "[Kube]\nYaml=app/bqa.yaml\n", "app/bqa.yaml", bqaKubeYAML))
	var pod struct{ State string }
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/pods/bqa-kpod/json", nil), &pod)
	if pod.State != "Running" {
		t.Fatalf("the played pod is %q", pod.State)
	}
	if st := te.quadletStatus(); st["bqa-kube.kube"] != "active/running" {
		t.Fatalf("statuses: %v", st)
	}
	te.mustFail(http.StatusBadRequest, "DELETE", "/quadlets/bqa-kube.kube", nil, "force is not set")
	te.Must(http.StatusOK, "DELETE", "/quadlets/bqa-kube.kube?force=true", nil)
	if te.exists("/pods/bqa-kpod") {
		t.Fatal("the pod outlived its .kube quadlet")
	}
	te.mustFail(http.StatusBadRequest, "POST", "/quadlets?activate=true", tarOf(t, "bqa-bad.kube", "[Kube]\nYaml=missing.yaml\n"), "bqa-bad.kube", "missing.yaml")
	te.mustFail(http.StatusNotFound, "GET", "/quadlets/bqa-bad.kube/exists", nil)
}

// TestQuadletImageBuildActivation activates a .image (an ImageTag given
// to a present image, no pull), a .build whose Containerfile starts FROM
// that tag, and a .container running the built image with an env secret
// and a tmpfs; it checks the container's output, the statuses, and that
// forced removals take the tag and the built image away.
func TestQuadletImageBuildActivation(t *testing.T) {
	te := startEngine(t)
	te.Must(http.StatusOK, "POST", "/secrets/create?name=bqa-s", "s3cret")
	t.Cleanup(func() { te.Do("DELETE", "/secrets/bqa-s", nil) })
	te.Must(http.StatusOK, "POST", "/quadlets?activate=true", tarOf(t, "bqa-img.image", "[Image]\nImage=localhost/busybox:latest\nImageTag=localhost/bqa-tagged:1\n"))
	te.Must(http.StatusOK, "POST", "/quadlets?activate=true", tarOf(t,
		"bqa-b.build", "[Build]\nImageTag=localhost/bqa-built:1\nFile=ctx/Containerfile\nSetWorkingDirectory=file\nBuildArg=WORD=built-by-quadlet\nLabel=from=quadlet\n",
		"ctx/Containerfile", "FROM localhost/bqa-tagged:1\nARG WORD\nRUN echo $WORD > /built\n"))
	te.Must(http.StatusOK, "POST", "/quadlets?activate=true", tarOf(t, "bqa-run.container",
		"[Container]\nImage=bqa-b.build\nSecret=bqa-s,type=env,target=S\nTmpfs=/t\nUser=0\nWorkingDir=/t\n"+
			"Exec=sh -c \"busybox cat /built; echo secret=$S; busybox grep -c ' /t tmpfs' /proc/mounts; pwd\"\n"))
	var code int
	json.Unmarshal(te.Must(http.StatusOK, "POST", "/containers/systemd-bqa-run/wait", nil), &code)
	logs := te.Logs("systemd-bqa-run")
	for _, want := range []string{"built-by-quadlet", "secret=s3cret", "1\n/t"} {
		if !strings.Contains(logs, want) {
			t.Fatalf("the container's output lacks %q (exit %d):\n%s", want, code, logs)
		}
	}
	var img struct {
		Config struct{ Labels map[string]string }
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/images/localhost/bqa-built:1/json", nil), &img)
	if img.Config.Labels["from"] != "quadlet" {
		t.Fatalf("built image labels: %v", img.Config.Labels)
	}
	st := te.quadletStatus()
	if st["bqa-run.container"] != "inactive/dead" || st["bqa-b.build"] != "active/exited" || st["bqa-img.image"] != "active/exited" {
		t.Fatalf("statuses: %v", st)
	}
	te.Must(http.StatusOK, "DELETE", "/quadlets?quadlets=bqa-run.container&quadlets=bqa-b.build&quadlets=bqa-img.image&force=true", nil)
	if te.exists("/images/localhost/bqa-built:1") || te.exists("/images/localhost/bqa-tagged:1") || !te.exists("/images/localhost/busybox:latest") {
		t.Fatal("after removal: the built image or the tag stayed, or the image the .image named went")
	}
}
