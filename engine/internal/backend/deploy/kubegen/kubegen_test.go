package kubegen

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-project/berth/engine/internal/core"
)

// TestCheckOptions: the query rules of kube generate.
func TestCheckOptions(t *testing.T) {
	for _, tc := range []struct {
		opts     core.KubeGenerateOptions
		field    string
		typ      string
		replicas int32
	}{
		{opts: core.KubeGenerateOptions{NamesOrIDs: []string{"a"}}, typ: "pod", replicas: 1},
		{opts: core.KubeGenerateOptions{NamesOrIDs: []string{"a"}, Type: "deployment", Replicas: 3}, typ: "deployment", replicas: 3},
		{opts: core.KubeGenerateOptions{NamesOrIDs: []string{"a"}, Type: "job", Replicas: 1}, typ: "job", replicas: 1},
		{opts: core.KubeGenerateOptions{}, field: "names"},
		{opts: core.KubeGenerateOptions{NamesOrIDs: []string{""}}, field: "names"},
		{opts: core.KubeGenerateOptions{NamesOrIDs: []string{"a"}, Type: "StatefulSet"}, field: "type"},
		{opts: core.KubeGenerateOptions{NamesOrIDs: []string{"a"}, Replicas: 2}, field: "replicas"},
		{opts: core.KubeGenerateOptions{NamesOrIDs: []string{"a"}, Type: "deployment", Replicas: -1}, field: "replicas"},
	} {
		opts := tc.opts
		err := checkOptions(&opts)
		var fe *core.FieldError
		switch {
		case tc.field != "":
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Errorf("%+v: %v, want an error naming %s", tc.opts, err, tc.field)
			}
		case err != nil || opts.Type != tc.typ || opts.Replicas != tc.replicas:
			t.Errorf("%+v: %+v %v", tc.opts, opts, err)
		}
	}
}

// TestContainerFields: names, ports, limits and capabilities as Podman writes them.
func TestContainerFields(t *testing.T) {
	for path, want := range map[string]string{"/": "root", "/mnt/data/": "mnt-data", "/var/my_dir": "var-my-dir"} {
		if got := hostPathName(path); got != want {
			t.Errorf("hostPathName(%q) = %q, want %q", path, got, want)
		}
	}
	ports := containerPorts([]core.PortMapping{{ContainerPort: 80, HostPort: 8080, Range: 2, Protocol: "tcp,udp"}})
	if len(ports) != 4 || ports[1].ContainerPort != 81 || ports[1].HostPort != 8081 || ports[2].Protocol != corev1.ProtocolUDP || ports[0].Protocol != "" {
		t.Errorf("ports %+v", ports)
	}
	limit, quota, period := int64(128<<20), int64(50000), uint64(100000)
	res := resources(core.ContainerSpec{Resources: &specs.LinuxResources{
		Memory: &specs.LinuxMemory{Limit: &limit}, CPU: &specs.LinuxCPU{Quota: &quota, Period: &period},
	}})
	if res.Limits.Memory().String() != "128Mi" || res.Limits.Cpu().String() != "500m" {
		t.Errorf("limits %v", res.Limits)
	}
	sc := securityContext(core.ContainerSpec{CapAdd: []string{"net_admin"}, CapDrop: []string{"CAP_CHOWN"}, User: "1000:50", ReadOnly: true})
	if strings.Join(capNames(sc.Capabilities.Add), ",") != "CAP_NET_ADMIN" ||
		strings.Join(capNames(sc.Capabilities.Drop), ",") != "CAP_MKNOD,CAP_NET_RAW,CAP_AUDIT_WRITE,CAP_CHOWN" ||
		*sc.RunAsUser != 1000 || *sc.RunAsGroup != 50 || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("security context %+v", sc)
	}
	sc = securityContext(core.ContainerSpec{SeccompProfilePath: "unconfined", ApparmorProfile: "unconfined"})
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeUnconfined || sc.AppArmorProfile == nil || sc.AppArmorProfile.Type != corev1.AppArmorProfileTypeUnconfined {
		t.Errorf("unconfined: %+v", sc)
	}
	sc = securityContext(core.ContainerSpec{SeccompProfilePath: "/p.json"})
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeLocalhost || *sc.SeccompProfile.LocalhostProfile != "/p.json" || sc.AppArmorProfile != nil {
		t.Errorf("profile file: %+v", sc)
	}
	if sc := securityContext(core.ContainerSpec{SeccompProfilePath: "/usr/share/containers/seccomp.json"}); sc.SeccompProfile != nil {
		t.Errorf("the default profile's path: %+v", sc.SeccompProfile)
	}
	if sc := securityContext(core.ContainerSpec{Privileged: true}); sc.Capabilities != nil || !*sc.Privileged {
		t.Errorf("privileged %+v", sc)
	}
}

func capNames(caps []corev1.Capability) []string {
	out := make([]string, len(caps))
	for i, c := range caps {
		out[i] = string(c)
	}
	return out
}

// TestServiceNodePorts: node ports are distinct and in range; more ports
// than the range holds is refused, not looped on.
func TestServiceNodePorts(t *testing.T) {
	pod := newPod("p", false)
	var ports []corev1.ContainerPort
	for i := int32(1); i <= 100; i++ {
		ports = append(ports, corev1.ContainerPort{ContainerPort: i})
	}
	used := map[int32]bool{}
	svc, err := service(workload{pod: pod, ports: ports}, metav1.Now(), used)
	if err != nil || len(svc.Spec.Ports) != 100 || len(used) != 100 {
		t.Fatalf("%v %v", svc, err)
	}
	for _, p := range svc.Spec.Ports {
		if p.NodePort < firstNodePort || p.NodePort > lastNodePort {
			t.Errorf("node port %d", p.NodePort)
		}
	}
	many := make([]corev1.ContainerPort, lastNodePort-firstNodePort+1)
	if _, err := service(workload{pod: pod, ports: many}, metav1.Now(), used); !errors.Is(err, core.ErrInvalidArgument) {
		t.Errorf("too many ports: %v", err)
	}
	if svc, err := service(workload{pod: pod}, metav1.Now(), used); svc != nil || err != nil {
		t.Errorf("no ports: %v %v", svc, err)
	}
}

// TestLivenessProbe: a healthcheck becomes an exec probe with its timings
// in whole seconds and the engine's defaults written out; none, NONE and
// an empty command make no probe.
func TestLivenessProbe(t *testing.T) {
	for _, tc := range []struct {
		name string
		hc   *core.HealthConfig
		want *corev1.Probe
	}{
		{"none", nil, nil},
		{"NONE", &core.HealthConfig{Test: []string{"NONE"}}, nil},
		{"empty CMD", &core.HealthConfig{Test: []string{"CMD"}}, nil},
		{"CMD", &core.HealthConfig{Test: []string{"CMD", "pgrep", "nginx"}, Interval: 30 * time.Second, Timeout: 5 * time.Second, Retries: 4, StartPeriod: 1500 * time.Millisecond},
			&corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"pgrep", "nginx"}}},
				PeriodSeconds: 30, TimeoutSeconds: 5, FailureThreshold: 4, InitialDelaySeconds: 2}},
		{"CMD-SHELL with defaults", &core.HealthConfig{Test: []string{"CMD-SHELL", "curl -f localhost"}},
			&corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "curl -f localhost"}}},
				TimeoutSeconds: 30, FailureThreshold: 3}},
		{"plain command", &core.HealthConfig{Test: []string{"/bin/check"}, Interval: time.Second},
			&corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/check"}}},
				PeriodSeconds: 1, TimeoutSeconds: 30, FailureThreshold: 3}},
	} {
		if got := livenessProbe(tc.hc); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if got := *deviceType("/dev/null"); got != corev1.HostPathCharDev {
		t.Errorf("/dev/null is %s", got)
	}
}
