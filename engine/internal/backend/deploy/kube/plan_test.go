package kube

import (
	"context"
	"errors"
	"strings"
	"testing"

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
		if tc.field != "" {
			var fe *core.FieldError
			if !errors.As(err, &fe) || !strings.Contains(fe.Error(), tc.field) {
				t.Errorf("%s: %v, want a 400 naming %s", tc.name, err, tc.field)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
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
