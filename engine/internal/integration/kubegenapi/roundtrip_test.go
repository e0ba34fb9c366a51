package kubegenapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestGenerateKubeRoundTrip: the YAML kube generate writes for a pod (and,
// with service and type deployment, a Service and Deployment) plays back
// through kube play into a running pod whose container has the original's
// command and environment, and kube down removes it.
func TestGenerateKubeRoundTrip(t *testing.T) {
	te := startEngine(t)
	webPod(te, 18226)
	podYAML := string(te.Must(http.StatusOK, "GET", "/kube/generate?names=bkgweb&names=bkgdata", nil))
	deployYAML := string(te.Must(http.StatusOK, "GET", "/kube/generate?names=bkgweb&service=true&type=deployment", nil))
	te.Must(http.StatusOK, "DELETE", "/pods/bkgweb?force=true&timeout=0", nil)
	te.Must(http.StatusNoContent, "DELETE", "/volumes/bkgdata", nil)

	for _, tc := range []struct {
		name, yaml, pod string
	}{
		{"pod", podYAML, "bkgweb"},
		{"deployment", deployYAML, "bkgweb-deployment-pod-0"},
	} {
		te.Must(http.StatusOK, "POST", "/kube/play", strings.NewReader(tc.yaml))
		var pod struct {
			State      string
			Containers []struct{ ID, Name string }
		}
		if err := json.Unmarshal(te.Must(http.StatusOK, "GET", "/pods/"+tc.pod+"/json", nil), &pod); err != nil {
			t.Fatal(err)
		}
		if pod.State != "Running" {
			t.Errorf("%s: pod %s is %s after kube play", tc.name, tc.pod, pod.State)
		}
		var app string
		for _, c := range pod.Containers {
			if strings.HasSuffix(c.Name, "bkgweb-app") {
				app = c.ID
			}
		}
		if app == "" {
			t.Fatalf("%s: no bkgweb-app container in %+v", tc.name, pod.Containers)
		}
		var ctr struct {
			Path   string
			Args   []string
			Config struct{ Env []string }
		}
		if err := json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+app+"/json", nil), &ctr); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(ctr.Config.Env, "GREETING=hello") || ctr.Path != "sleep" || !slices.Equal(ctr.Args, []string{"1000"}) {
			t.Errorf("%s: played container's env %v, process %s %v", tc.name, ctr.Config.Env, ctr.Path, ctr.Args)
		}
		te.Must(http.StatusOK, "DELETE", "/kube/play?force=true", strings.NewReader(tc.yaml))
		if status, _ := te.Do("GET", "/pods/"+tc.pod+"/exists", nil); status != http.StatusNotFound {
			t.Errorf("%s: pod %s still exists after kube down (%d)", tc.name, tc.pod, status)
		}
	}
}

// TestGenerateKubeRoundTripInitProbeDevice: a pod with an "always" and a
// "once" init container and a container with a healthcheck and a device
// becomes initContainers (the always one named in the init type
// annotation), a livenessProbe with the healthcheck's timings and a
// CharDevice hostPath volume; the engine runs the init containers at the
// pod's start (removing the once one); played back, the YAML makes the
// same init containers, healthcheck and device, and the healthcheck, which
// needs the device, passes.
func TestGenerateKubeRoundTripInitProbeDevice(t *testing.T) {
	te := startEngine(t)
	te.CreatePod(map[string]any{"name": "bkgfid"})
	// Bad requests are refused naming the member.
	for _, bad := range []struct {
		spec   map[string]any
		member string
	}{
		{map[string]any{"init_container_type": "always"}, "init_container_type"},
		{map[string]any{"pod": "bkgfid", "init_container_type": "sometimes"}, "init_container_type"},
		{map[string]any{"devices": []map[string]any{{"path": os.TempDir()}}}, "devices"},
		{map[string]any{"devices": []map[string]any{{"path": "/dev/null:/dev/x:rx"}}}, "devices"},
		{map[string]any{"devices": []map[string]any{{"path": "dev/null"}}}, "devices"},
		{map[string]any{"devices": []map[string]any{{"path": "/dev/bkg-no-such-device"}}}, "devices"},
	} {
		bad.spec["image"] = "localhost/busybox:latest"
		status, body := te.Do("POST", "/containers/create", bad.spec)
		if status != http.StatusBadRequest || !strings.Contains(string(body), bad.member) {
			t.Errorf("%v: %d %s, want a 400 naming %s", bad.spec, status, body, bad.member)
		}
	}
	// A failing init container stops the pod's start before its members.
	te.CreatePod(map[string]any{"name": "bkgfail"})
	te.Create(map[string]any{"image": "localhost/busybox:latest", "name": "bkgfail-init", "pod": "bkgfail",
		"command": []string{"false"}, "init_container_type": "always"})
	te.Create(map[string]any{"image": "localhost/busybox:latest", "name": "bkgfail-app", "pod": "bkgfail", "command": []string{"sleep", "1000"}})
	if status, body := te.Do("POST", "/pods/bkgfail/start", nil); status != http.StatusConflict || !strings.Contains(string(body), "exited with code 1") {
		t.Errorf("starting a pod whose init container fails: %d %s", status, body)
	}
	var failApp struct{ State struct{ Status string } }
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/bkgfail-app/json", nil), &failApp)
	if failApp.State.Status == "running" {
		t.Error("a member started although the init container failed")
	}
	te.Must(http.StatusOK, "DELETE", "/pods/bkgfail?force=true&timeout=0", nil)

	te.Create(map[string]any{"image": "localhost/busybox:latest", "name": "bkgfid-always", "pod": "bkgfid",
		"command": []string{"true"}, "init_container_type": "always"})
	te.Create(map[string]any{"image": "localhost/busybox:latest", "name": "bkgfid-once", "pod": "bkgfid",
		"command": []string{"true"}, "init_container_type": "once"})
	te.Create(map[string]any{"image": "localhost/busybox:latest", "name": "bkgfid-app", "pod": "bkgfid",
		"command": []string{"sleep", "1000"},
		"devices": []map[string]any{{"path": "/dev/null:/dev/bkgnull:rw"}},
		"healthconfig": map[string]any{"Test": []string{"CMD-SHELL", "test -c /dev/bkgnull"},
			"Interval": 5 * time.Second, "Timeout": 3 * time.Second, "Retries": 2, "StartPeriod": time.Second},
	})
	yaml := te.Must(http.StatusOK, "GET", "/kube/generate?names=bkgfid", nil)
	pod, ok := objects(t, yaml)["Pod/bkgfid"].(*corev1.Pod)
	if !ok {
		t.Fatalf("no Pod/bkgfid in\n%s", yaml)
	}
	var inits []string
	for _, c := range pod.Spec.InitContainers {
		inits = append(inits, c.Name)
	}
	if !slices.Equal(inits, []string{"bkgfid-always", "bkgfid-once"}) || len(pod.Spec.Containers) != 1 {
		t.Fatalf("init containers %v, containers %d:\n%s", inits, len(pod.Spec.Containers), yaml)
	}
	if got := pod.Annotations["io.podman.annotations.init.container.type/bkgfid-always"]; got != "always" {
		t.Errorf("init type annotation %q in %v", got, pod.Annotations)
	}
	app := pod.Spec.Containers[0]
	want := &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "test -c /dev/bkgnull"}}},
		PeriodSeconds: 5, TimeoutSeconds: 3, FailureThreshold: 2, InitialDelaySeconds: 1,
	}
	if !reflect.DeepEqual(app.LivenessProbe, want) {
		t.Errorf("livenessProbe %+v, want %+v", app.LivenessProbe, want)
	}
	if len(app.VolumeMounts) != 1 || app.VolumeMounts[0].MountPath != "/dev/bkgnull" || app.VolumeMounts[0].ReadOnly {
		t.Fatalf("volume mounts %+v", app.VolumeMounts)
	}
	if v := pod.Spec.Volumes; len(v) != 1 || v[0].HostPath == nil || v[0].HostPath.Path != "/dev/null" || *v[0].HostPath.Type != corev1.HostPathCharDev {
		t.Fatalf("volumes %+v", v)
	}

	// The engine runs the init containers first; the once one goes.
	te.Must(http.StatusOK, "POST", "/pods/bkgfid/start", nil)
	if status, _ := te.Do("GET", "/containers/bkgfid-once/exists", nil); status != http.StatusNotFound {
		t.Errorf("the once init container is still there after the pod's start (%d)", status)
	}
	var always struct{ State struct{ Status string } }
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/bkgfid-always/json", nil), &always)
	if always.State.Status != "exited" {
		t.Errorf("the always init container is %s, want exited", always.State.Status)
	}
	var podState struct{ State string }
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/pods/bkgfid/json", nil), &podState)
	if podState.State != "Running" {
		t.Errorf("pod is %s, want Running (init containers do not count)", podState.State)
	}
	te.Must(http.StatusOK, "DELETE", "/pods/bkgfid?force=true&timeout=0", nil)

	var report struct {
		Pods []struct {
			ID                                          string
			Containers, InitContainers, ContainerErrors []string
		}
	}
	if err := json.Unmarshal(te.Must(http.StatusOK, "POST", "/kube/play", bytes.NewReader(yaml)), &report); err != nil {
		t.Fatal(err)
	}
	if len(report.Pods) != 1 || len(report.Pods[0].InitContainers) != 2 || len(report.Pods[0].ContainerErrors) != 0 {
		t.Fatalf("play report %+v", report)
	}
	var played struct {
		State  struct{ Status string }
		Config struct {
			Healthcheck *struct {
				Test                           []string
				Interval, Timeout, StartPeriod int64
				Retries                        int
			}
		}
		HostConfig struct {
			Devices []struct{ PathOnHost, PathInContainer, CgroupPermissions string }
		}
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/bkgfid-bkgfid-app/json", nil), &played)
	hc := played.Config.Healthcheck
	if hc == nil || !slices.Equal(hc.Test, []string{"CMD", "/bin/sh", "-c", "test -c /dev/bkgnull"}) ||
		hc.Interval != int64(5*time.Second) || hc.Timeout != int64(3*time.Second) || hc.StartPeriod != int64(time.Second) || hc.Retries != 2 {
		t.Errorf("played healthcheck %+v", hc)
	}
	if d := played.HostConfig.Devices; len(d) != 1 || d[0].PathOnHost != "/dev/null" || d[0].PathInContainer != "/dev/bkgnull" || d[0].CgroupPermissions != "rwm" {
		t.Errorf("played devices %+v", d)
	}
	var check struct{ Status string }
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/bkgfid-bkgfid-app/healthcheck", nil), &check)
	if check.Status != "healthy" {
		t.Errorf("the played healthcheck (it needs the device) is %q", check.Status)
	}
	// Played, the once init container ran and went; the always one stays
	// and is generated again as it was.
	if status, _ := te.Do("GET", "/containers/bkgfid-bkgfid-once/exists", nil); status != http.StatusNotFound {
		t.Errorf("the played once init container is still there (%d)", status)
	}
	again, ok := objects(t, te.Must(http.StatusOK, "GET", "/kube/generate?names=bkgfid", nil))["Pod/bkgfid"].(*corev1.Pod)
	if !ok || len(again.Spec.InitContainers) != 1 || again.Spec.InitContainers[0].Name != "bkgfid-bkgfid-always" ||
		again.Annotations["io.podman.annotations.init.container.type/bkgfid-bkgfid-always"] != "always" {
		t.Errorf("generated again: %+v", again)
	}
	te.Must(http.StatusOK, "DELETE", "/kube/play", bytes.NewReader(yaml))
}
