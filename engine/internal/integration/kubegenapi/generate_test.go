package kubegenapi

import (
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// webPod creates pod bkgweb (host port hostPort -> 80) with container
// bkgweb-app (env, a named volume, a read-only bind mount, an added
// capability, a memory limit) and volume bkgdata; it returns the pod's ID.
func webPod(te *testEngine, hostPort int) string {
	te.T.Helper()
	te.Must(http.StatusCreated, "POST", "/volumes/create", map[string]any{"Name": "bkgdata"})
	podID := te.CreatePod(map[string]any{
		"name":         "bkgweb",
		"portmappings": []map[string]any{{"container_port": 80, "host_port": hostPort, "host_ip": "127.0.0.1"}},
	})
	te.Create(map[string]any{
		"image": "localhost/busybox:latest", "name": "bkgweb-app", "pod": "bkgweb",
		"command": []string{"sleep", "1000"}, "env": map[string]string{"GREETING": "hello"},
		"volumes":         []map[string]any{{"Name": "bkgdata", "Dest": "/data"}},
		"mounts":          []map[string]any{{"type": "bind", "source": os.TempDir(), "destination": "/hosttmp", "options": []string{"ro"}}},
		"cap_add":         []string{"NET_ADMIN"},
		"resource_limits": map[string]any{"memory": map[string]any{"limit": 64 << 20}},
		"restart_policy":  "always",
	})
	return podID
}

// TestGenerateKubePodAndVolume: a pod and a volume become a Pod and a
// PersistentVolumeClaim with Podman's names and fields, on both routes.
func TestGenerateKubePodAndVolume(t *testing.T) {
	te := startEngine(t)
	podID := webPod(te, 18221)
	for _, route := range []string{"/generate/kube", "/kube/generate"} {
		yaml := te.Must(http.StatusOK, "GET", route+"?names=bkgweb&names=bkgdata", nil)
		objs := objects(t, yaml)
		if len(objs) != 2 {
			t.Fatalf("%s: %d objects, want a Pod and a claim:\n%s", route, len(objs), yaml)
		}
		pvc, ok := objs["PersistentVolumeClaim/bkgdata"].(*corev1.PersistentVolumeClaim)
		if !ok || pvc.Annotations["volume.podman.io/driver"] != "local" || pvc.Spec.Resources.Requests.Storage().String() != "1Gi" {
			t.Fatalf("%s: claim %+v", route, objs["PersistentVolumeClaim/bkgdata"])
		}
		pod, ok := objs["Pod/bkgweb"].(*corev1.Pod)
		if !ok {
			t.Fatalf("%s: no Pod/bkgweb in %v", route, keys(objs))
		}
		if pod.Labels["app"] != "bkgweb" || pod.Spec.Hostname != "bkgweb" || pod.Spec.RestartPolicy != corev1.RestartPolicyAlways {
			t.Errorf("%s: pod meta/spec %+v %+v", route, pod.ObjectMeta, pod.Spec)
		}
		if len(pod.Spec.Containers) != 1 {
			t.Fatalf("%s: containers %+v", route, pod.Spec.Containers)
		}
		c := pod.Spec.Containers[0]
		if c.Name != "bkgweb-app" || c.Image != "localhost/busybox:latest" || !slices.Equal(c.Command, []string{"sleep", "1000"}) {
			t.Errorf("%s: container %+v", route, c)
		}
		if len(c.Env) != 1 || c.Env[0] != (corev1.EnvVar{Name: "GREETING", Value: "hello"}) {
			t.Errorf("%s: env %+v", route, c.Env)
		}
		if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 80 || c.Ports[0].HostPort != 18221 {
			t.Errorf("%s: ports %+v (the pod's ports go on its first container)", route, c.Ports)
		}
		if c.Resources.Limits.Memory().Value() != 64<<20 {
			t.Errorf("%s: limits %+v", route, c.Resources.Limits)
		}
		if c.SecurityContext == nil || c.SecurityContext.Capabilities == nil || !slices.Contains(c.SecurityContext.Capabilities.Add, "CAP_NET_ADMIN") {
			t.Errorf("%s: security context %+v", route, c.SecurityContext)
		}
		mounts := map[string]corev1.VolumeMount{}
		for _, m := range c.VolumeMounts {
			mounts[m.MountPath] = m
		}
		vols := map[string]corev1.Volume{}
		for _, v := range pod.Spec.Volumes {
			vols[v.Name] = v
		}
		data, host := mounts["/data"], mounts["/hosttmp"]
		if v := vols[data.Name]; v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "bkgdata" {
			t.Errorf("%s: /data is %+v, volume %+v", route, data, v)
		}
		if v := vols[host.Name]; !host.ReadOnly || v.HostPath == nil || v.HostPath.Path != os.TempDir() || *v.HostPath.Type != corev1.HostPathDirectory {
			t.Errorf("%s: /hosttmp is %+v, volume %+v", route, host, v)
		}
		if got := pod.Annotations["io.kubernetes.cri-o.SandboxID/bkgweb-app"]; got != podID[:63] {
			t.Errorf("%s: sandbox annotation %q, want the pod ID cut to 63 characters", route, got)
		}
		if _, ok := pod.Annotations["io.podman.annotations.autoremove/bkgweb-app"]; ok {
			t.Errorf("%s: Podman-only annotations without podmanOnly: %v", route, pod.Annotations)
		}
	}

	// noTrunc keeps the whole ID; podmanOnly adds Podman's own annotations.
	pod := objects(t, te.Must(http.StatusOK, "GET", "/kube/generate?names=bkgweb&noTrunc=true&podmanOnly=true", nil))["Pod/bkgweb"].(*corev1.Pod)
	if got := pod.Annotations["io.kubernetes.cri-o.SandboxID/bkgweb-app"]; got != podID {
		t.Errorf("noTrunc: sandbox annotation %q, want %q", got, podID)
	}
	if got := pod.Annotations["io.podman.annotations.autoremove/bkgweb-app"]; got != "FALSE" {
		t.Errorf("podmanOnly: autoremove annotation %q in %v", got, pod.Annotations)
	}
}

// TestGenerateKubeServiceAndKinds: service adds a NodePort Service whose
// selector picks the workload; type makes a Deployment (with replicas), a
// DaemonSet or a Job around the same pod template.
func TestGenerateKubeServiceAndKinds(t *testing.T) {
	te := startEngine(t)
	te.Create(map[string]any{
		"image": "localhost/busybox:latest", "name": "bkgsolo", "command": []string{"sleep", "1000"},
		"portmappings": []map[string]any{{"container_port": 90, "host_port": 18222, "host_ip": "127.0.0.1"}},
		"work_dir":     "/tmp", "user": "1000",
	})
	objs := objects(t, te.Must(http.StatusOK, "GET", "/generate/kube?names=bkgsolo&service=true&type=deployment&replicas=3", nil))
	svc, ok := objs["Service/bkgsolo-pod"].(*corev1.Service)
	if !ok {
		t.Fatalf("no Service/bkgsolo-pod in %v", keys(objs))
	}
	if svc.Spec.Type != corev1.ServiceTypeNodePort || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 90 ||
		svc.Spec.Ports[0].NodePort < 30000 || svc.Spec.Ports[0].NodePort > 32767 || svc.Spec.Selector["app"] != "bkgsolo-pod" {
		t.Errorf("service %+v", svc.Spec)
	}
	dep, ok := objs["Deployment/bkgsolo-pod-deployment"].(*appsv1.Deployment)
	if !ok {
		t.Fatalf("no Deployment/bkgsolo-pod-deployment in %v", keys(objs))
	}
	if *dep.Spec.Replicas != 3 || dep.Spec.Selector.MatchLabels["app"] != "bkgsolo-pod" || dep.Spec.Template.Labels["app"] != "bkgsolo-pod" ||
		dep.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		t.Errorf("deployment %+v", dep.Spec)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	if c.WorkingDir != "/tmp" || c.SecurityContext.RunAsUser == nil || *c.SecurityContext.RunAsUser != 1000 || c.Ports[0].HostPort != 18222 {
		t.Errorf("container %+v", c)
	}
	for typ, key := range map[string]string{"daemonset": "DaemonSet/bkgsolo-pod-daemonset", "job": "Job/bkgsolo-pod-job", "pod": "Pod/bkgsolo-pod"} {
		objs := objects(t, te.Must(http.StatusOK, "GET", "/kube/generate?names=bkgsolo&type="+typ, nil))
		if _, ok := objs[key]; !ok || len(objs) != 1 {
			t.Errorf("type %s: %v, want only %s", typ, keys(objs), key)
		}
	}
}

// TestGenerateKubeBadInput: unknown names are 404, bad parameters 400
// naming the parameter.
func TestGenerateKubeBadInput(t *testing.T) {
	te := startEngine(t)
	webPod(te, 18223)
	for _, tc := range []struct {
		query  string
		status int
		field  string
	}{
		{"names=bkgnosuch", http.StatusNotFound, "bkgnosuch"},
		{"", http.StatusBadRequest, "names"},
		{"names=bkgweb&type=statefulset", http.StatusBadRequest, "type"},
		{"names=bkgweb&replicas=2", http.StatusBadRequest, "replicas"},
		{"names=bkgweb&type=deployment&replicas=-1", http.StatusBadRequest, "replicas"},
		{"names=bkgweb&type=deployment&replicas=many", http.StatusBadRequest, "replicas"},
		{"names=bkgweb&service=perhaps", http.StatusBadRequest, "service"},
		{"names=bkgweb&noTrunc=perhaps", http.StatusBadRequest, "notrunc"},
		{"names=bkgweb&podmanOnly=perhaps", http.StatusBadRequest, "podmanonly"},
		{"names=bkgweb-app", http.StatusBadRequest, "generate on the pod itself"},
	} {
		status, body := te.Do("GET", "/kube/generate?"+tc.query, nil)
		var e struct{ Message string }
		json.Unmarshal(body, &e)
		if status != tc.status || !strings.Contains(e.Message, tc.field) {
			t.Errorf("%q: %d %s, want %d naming %s", tc.query, status, body, tc.status, tc.field)
		}
	}
}

// TestPodmanKubeGenerate: podman 4.3.1's kube generate, generate kube and
// -s get the YAML from the engine.
func TestPodmanKubeGenerate(t *testing.T) {
	te := startEngine(t)
	webPod(te, 18224)
	for _, args := range [][]string{{"kube", "generate", "bkgweb"}, {"generate", "kube", "bkgweb", "bkgdata"}, {"kube", "generate", "-s", "bkgweb"}} {
		objs := objects(t, []byte(te.PodmanStdout(args...)))
		if _, ok := objs["Pod/bkgweb"]; !ok {
			t.Errorf("podman %s: %v", strings.Join(args, " "), keys(objs))
		}
		if args[len(args)-1] == "bkgdata" {
			if _, ok := objs["PersistentVolumeClaim/bkgdata"]; !ok {
				t.Errorf("podman %s: %v", strings.Join(args, " "), keys(objs))
			}
		}
		if args[2] == "-s" {
			if _, ok := objs["Service/bkgweb"]; !ok {
				t.Errorf("podman %s: %v", strings.Join(args, " "), keys(objs))
			}
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestPodmanGenerateKubeServiceOfPod: podman 4.3.1's `kube generate -s`
// of a pod gets a NodePort Service for the pod's published ports, ahead of
// the Pod as Podman orders them (Services before workloads).
func TestPodmanGenerateKubeServiceOfPod(t *testing.T) {
	te := startEngine(t)
	te.MustPodman("pod", "create", "--name", "bkgsvc", "-p", "127.0.0.1:18224:80", "-p", "127.0.0.1:18225:81/udp")
	te.MustPodman("create", "--pod", "bkgsvc", "--name", "bkgsvc-web", "localhost/busybox:latest", "sleep", "1000")
	out := te.MustPodman("kube", "generate", "-s", "bkgsvc")
	objs := objects(t, []byte(out))
	svc, ok := objs["Service/bkgsvc"].(*corev1.Service)
	if !ok {
		t.Fatalf("no Service/bkgsvc in %v:\n%s", keys(objs), out)
	}
	if _, ok := objs["Pod/bkgsvc"]; !ok || strings.Index(out, "kind: Service") > strings.Index(out, "kind: Pod") {
		t.Fatalf("want the Service, then the Pod:\n%s", out)
	}
	ports := map[int32]corev1.ServicePort{}
	for _, p := range svc.Spec.Ports {
		ports[p.Port] = p
	}
	tcp, udp := ports[80], ports[81]
	if svc.Spec.Type != corev1.ServiceTypeNodePort || svc.Spec.Selector["app"] != "bkgsvc" || len(ports) != 2 ||
		tcp.TargetPort.IntValue() != 80 || tcp.NodePort < 30000 || tcp.NodePort > 32767 || tcp.Name != "80" ||
		udp.Protocol != corev1.ProtocolUDP {
		t.Fatalf("service %+v", svc.Spec)
	}
	// Without -s there is no Service.
	if objs := objects(t, []byte(te.MustPodman("kube", "generate", "bkgsvc"))); objs["Service/bkgsvc"] != nil {
		t.Fatalf("a Service without -s: %v", keys(objs))
	}
}
