package kube

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/core"
)

// localImages answers every image as present; the plan needs nothing else
// of the image backend.
type localImages struct{ core.Images }

func (localImages) Lookup(_ context.Context, ref string) (*core.Image, error) {
	return &core.Image{ID: ref}, nil
}

// planOf plans a pod whose spec (indented as under spec:) is given.
func planOf(t *testing.T, annotations, spec string) (*plan, error) {
	t.Helper()
	yaml := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n" + annotations + "spec:\n" + spec
	docs, err := parseDocuments([]byte(yaml))
	if err != nil {
		return nil, err
	}
	return New(Options{Images: localImages{}}).plan(context.Background(), docs, core.KubePlayOptions{})
}

// TestPlanDevicesAndInitContainers: hostPath volumes of type CharDevice and
// BlockDevice become devices at the mount path (read-only: permission r),
// as Podman plays them; init containers are "once" unless the init type
// annotation (pod-wide, or suffixed with the container's name) says
// always; init containers with probes are refused.
func TestPlanDevicesAndInitContainers(t *testing.T) {
	const app = "  containers:\n  - name: app\n    image: busybox\n"
	devices := func(typ, readOnly string) string {
		return app + "    volumeMounts:\n    - {name: dev, mountPath: /dev/mine" + readOnly + "}\n" +
			"  volumes:\n  - name: dev\n    hostPath: {path: /dev/null, type: " + typ + "}\n"
	}
	inits := "  initContainers:\n  - {name: one, image: busybox}\n  - {name: two, image: busybox}\n" + app
	for _, tc := range []struct {
		name, annotations, spec string
		devices                 []string
		initTypes               []string
		field                   string
	}{
		{name: "char device", spec: devices("CharDevice", ""), devices: []string{"/dev/null:/dev/mine:rwm"}},
		{name: "read-only device", spec: devices("CharDevice", ", readOnly: true"), devices: []string{"/dev/null:/dev/mine:r"}},
		{name: "not a block device", spec: devices("BlockDevice", ""), field: "spec.volumes[0].hostPath"},
		{name: "file as a device", spec: strings.Replace(devices("CharDevice", ""), "/dev/null", "/etc/hostname", 1), field: "spec.volumes[0].hostPath"},
		{name: "init default once", spec: inits, initTypes: []string{"once", "once"}},
		{name: "init always for the pod", annotations: "  annotations: {io.podman.annotations.init.container.type: always}\n", spec: inits, initTypes: []string{"always", "always"}},
		{name: "init always for one", annotations: "  annotations: {io.podman.annotations.init.container.type/two: always}\n", spec: inits, initTypes: []string{"once", "always"}},
		{name: "init bad type", annotations: "  annotations: {io.podman.annotations.init.container.type: sometimes}\n", spec: inits, field: "metadata.annotations"},
		{name: "init with a probe", spec: "  initContainers:\n  - name: one\n    image: busybox\n    livenessProbe: {exec: {command: [\"true\"]}}\n" + app,
			field: "spec.initContainers[0].livenessProbe"},
	} {
		pl, err := planOf(t, tc.annotations, tc.spec)
		if !planned(t, tc.name, tc.field, err) {
			continue
		}
		pp := pl.pods[0]
		var devs []string
		for _, d := range pp.containers[0].Devices {
			devs = append(devs, d.Path)
		}
		if strings.Join(devs, ",") != strings.Join(tc.devices, ",") {
			t.Errorf("%s: devices %v, want %v", tc.name, devs, tc.devices)
		}
		var types []string
		for _, c := range pp.initContainers {
			types = append(types, c.InitContainerType)
		}
		if strings.Join(types, ",") != strings.Join(tc.initTypes, ",") {
			t.Errorf("%s: init container types %v, want %v", tc.name, types, tc.initTypes)
		}
	}
}

// TestPlanProbes: how each probe becomes a healthcheck. livenessProbe and
// readinessProbe are the healthcheck, a liveness probe restarting the
// container where the pod restarts containers (Podman's mapping);
// startupProbe is the startup healthcheck (with "exit 0" as the
// healthcheck when alone, as Podman 5); with both liveness and readiness
// the liveness probe is the healthcheck and the pod's Logs say the
// readiness probe is not applied; what the engine cannot run is refused
// naming the field.
func TestPlanProbes(t *testing.T) {
	const exec = "{exec: {command: [check]}, periodSeconds: 5, timeoutSeconds: 2, failureThreshold: 4, initialDelaySeconds: 1}"
	container := func(restart, probes string) string {
		return restart + "  containers:\n  - name: app\n    image: busybox\n    ports: [{name: web, containerPort: 8080}]\n" + probes
	}
	checkCmd := []string{"CMD", "check"}
	timed := func(test []string) *core.HealthConfig {
		return &core.HealthConfig{Test: test, Interval: 5 * time.Second, Timeout: 2 * time.Second, Retries: 4, StartPeriod: time.Second}
	}
	for _, tc := range []struct {
		name, spec string
		health     *core.HealthConfig
		startup    *core.StartupHealthConfig
		action     core.HealthOnFailure
		field      string
		logs       string
	}{
		{name: "liveness, Always", spec: container("", "    livenessProbe: "+exec+"\n"), health: timed(checkCmd), action: core.HealthOnFailureRestart},
		{name: "liveness, OnFailure", spec: container("  restartPolicy: OnFailure\n", "    livenessProbe: "+exec+"\n"), health: timed(checkCmd), action: core.HealthOnFailureRestart},
		{name: "liveness, Never", spec: container("  restartPolicy: Never\n", "    livenessProbe: "+exec+"\n"), health: timed(checkCmd)},
		{name: "readiness", spec: container("", "    readinessProbe: "+exec+"\n"), health: timed(checkCmd)},
		{name: "liveness defaults, httpGet by port name", spec: container("", "    livenessProbe: {httpGet: {port: web, path: /ok}}\n"),
			health: &core.HealthConfig{Test: []string{"CMD-SHELL", "curl -f 'http://localhost:8080/ok' || wget -q -O /dev/null 'http://localhost:8080/ok' || exit 1"},
				Interval: 10 * time.Second, Timeout: time.Second, Retries: 3}, action: core.HealthOnFailureRestart},
		{name: "startup alone", spec: container("", "    startupProbe: {exec: {command: [check]}, periodSeconds: 5, timeoutSeconds: 2, failureThreshold: 4, initialDelaySeconds: 1, successThreshold: 2}\n"),
			health: timed([]string{"CMD-SHELL", "exit 0"}), startup: &core.StartupHealthConfig{HealthConfig: *timed(checkCmd), Successes: 2}},
		{name: "startup and liveness", spec: container("", "    startupProbe: {tcpSocket: {port: 8080}}\n    livenessProbe: "+exec+"\n"),
			health: timed(checkCmd), action: core.HealthOnFailureRestart,
			startup: &core.StartupHealthConfig{HealthConfig: core.HealthConfig{Test: []string{"CMD-SHELL", "nc -z 'localhost' 8080 || exit 1"}, Interval: 10 * time.Second, Timeout: time.Second, Retries: 3}}},
		{name: "liveness and readiness", spec: container("", "    livenessProbe: "+exec+"\n    readinessProbe: {exec: {command: [ready]}}\n"), health: timed(checkCmd), action: core.HealthOnFailureRestart,
			logs: "container app: readinessProbe not applied"},
		{name: "no handler", spec: container("", "    livenessProbe: {periodSeconds: 3}\n"), field: "spec.containers[0].livenessProbe"},
		{name: "startup without handler", spec: container("", "    startupProbe: {periodSeconds: 3}\n"), field: "spec.containers[0].startupProbe"},
		{name: "grpc", spec: container("", "    startupProbe: {grpc: {port: 8080}}\n"), field: "spec.containers[0].startupProbe.grpc"},
		{name: "readiness successThreshold", spec: container("", "    readinessProbe: {exec: {command: [check]}, successThreshold: 2}\n"), field: "spec.containers[0].readinessProbe.successThreshold"},
		{name: "unknown port name", spec: container("", "    livenessProbe: {tcpSocket: {port: db}}\n"), field: "spec.containers[0].livenessProbe"},
	} {
		pl, err := planOf(t, "", tc.spec)
		if !planned(t, tc.name, tc.field, err) {
			continue
		}
		cs := pl.pods[0].containers[0]
		if !reflect.DeepEqual(cs.HealthConfig, tc.health) || !reflect.DeepEqual(cs.StartupHealthConfig, tc.startup) || cs.HealthCheckOnFailureAction != tc.action {
			t.Errorf("%s: healthcheck %+v, startup %+v, on failure %s; want %+v, %+v, %s", tc.name,
				cs.HealthConfig, cs.StartupHealthConfig, cs.HealthCheckOnFailureAction, tc.health, tc.startup, tc.action)
		}
		if logs := strings.Join(pl.pods[0].logs, ""); (tc.logs == "") != (logs == "") || !strings.Contains(logs, tc.logs) {
			t.Errorf("%s: pod logs %q, want %q", tc.name, logs, tc.logs)
		}
	}
}

// TestPlanSdNotify: sd-notify modes that need a NOTIFY_SOCKET are refused
// naming the annotation, for the pod or one container; "ignore" passes.
func TestPlanSdNotify(t *testing.T) {
	const app = "  containers:\n  - name: app\n    image: busybox\n"
	for _, tc := range []struct {
		annotation string
		refused    bool
	}{
		{"io.containers.sdnotify: ignore", false},
		{"io.containers.sdnotify/app: ignore", false},
		{"io.containers.sdnotify: conmon", true},
		{"io.containers.sdnotify/app: container", true},
		{"io.containers.sdnotify: sometimes", true},
		{"io.containers.sdnotifyx: conmon", false},
	} {
		_, err := planOf(t, "  annotations: {"+tc.annotation+"}\n", app)
		key, _, _ := strings.Cut(tc.annotation, ":")
		var fe *core.FieldError
		switch {
		case tc.refused && (!errors.As(err, &fe) || !strings.Contains(err.Error(), key)):
			t.Errorf("%s: %v, want a 400 naming %s", tc.annotation, err, key)
		case !tc.refused && err != nil:
			t.Errorf("%s: %v", tc.annotation, err)
		}
	}
}

// planned reports whether the plan of case name was made: a case that
// names a field (field) must be refused with a 400 naming it, any other
// must plan without error; each failure is reported.
func planned(t *testing.T, name, field string, err error) bool {
	t.Helper()
	if field != "" {
		var fe *core.FieldError
		if !errors.As(err, &fe) || !strings.Contains(fe.Error(), field) {
			t.Errorf("%s: %v, want a 400 naming %s", name, err, field)
		}
		return false
	}
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return false
	}
	return true
}
