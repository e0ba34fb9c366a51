package kubeapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/kubetest"
	"github.com/berth-project/berth/engine/internal/testsupport/poll"
	"github.com/berth-project/berth/engine/internal/testsupport/tartest"
	"github.com/berth-project/berth/shared/testnet"
)

// playReport is the part of PlayKube's answer the tests read.
type playReport struct {
	Pods []struct {
		ID              string
		Containers      []string
		InitContainers  []string
		ContainerErrors []string
	}
	Volumes            []struct{ Name string }
	Secrets            []struct{ CreateReport struct{ ID string } }
	ServiceContainerID string
	ExitCode           *int32
}

func (te *testEngine) play(query, yaml string) playReport {
	te.T.Helper()
	var r playReport
	body := te.Must(http.StatusOK, "POST", "/kube/play"+query, strings.NewReader(yaml))
	if err := json.Unmarshal(body, &r); err != nil {
		te.T.Fatal(err)
	}
	// Without errors ContainerErrors is null, as Podman's report has it.
	var raw struct{ Pods []map[string]json.RawMessage }
	json.Unmarshal(body, &raw)
	for _, p := range raw.Pods {
		if string(p["ContainerErrors"]) != "null" {
			te.T.Fatalf("container errors: %s", p["ContainerErrors"])
		}
	}
	return r
}

func (te *testEngine) podNames() []string {
	var names []string
	for _, p := range te.pods() {
		names = append(names, p.Name+":"+p.Status)
	}
	sort.Strings(names)
	return names
}

// httpdContainer serves /etc over HTTP on port 80, named http.
const httpdContainer = `- name: srv
  image: localhost/busybox:latest
  command: ["busybox", "httpd", "-f", "-p", "80", "-h", "/etc"]
  ports: [{name: http, containerPort: 80}]
`

func deploymentYAML(port int) string {
	return kubetest.Deployment("bkp-app", "", 3, httpdContainer) + fmt.Sprintf(`---
apiVersion: v1
kind: Service
metadata: {name: bkp-one}
spec:
  type: NodePort
  selector: {app: bkp-single}
  ports: [{port: 80, targetPort: http, nodePort: %d}]
---
`, port) + kubetest.Pod("bkp-single", httpdContainer)
}

// TestKubePlayDeploymentService plays a 3-replica Deployment, a Pod and a
// NodePort Service selecting the Pod: one pod a replica named as Podman 4
// names them, the Service's node port reaches the selected pod; down
// removes all four pods.
func TestKubePlayDeploymentService(t *testing.T) {
	te := startEngine(t)
	port := testnet.FreePort(t)
	yaml := deploymentYAML(port)
	r := te.play("", yaml)
	if len(r.Pods) != 4 {
		t.Fatalf("pods in the report: %+v", r.Pods)
	}
	want := "bkp-app-pod-0:Running bkp-app-pod-1:Running bkp-app-pod-2:Running bkp-single:Running"
	if got := strings.Join(te.podNames(), " "); got != want {
		t.Fatalf("pods %q, want %q", got, want)
	}
	if got := poll.GetWithin(t, 15*time.Second, fmt.Sprintf("http://127.0.0.1:%d/hostname", port)); strings.TrimSpace(got) != "bkp-single" {
		t.Fatalf("node port answered %q", got)
	}
	var down struct {
		StopReport []struct{ Id string }
		RmReport   []struct {
			Id  string
			Err *string
		}
	}
	json.Unmarshal(te.Must(http.StatusOK, "DELETE", "/play/kube", strings.NewReader(yaml)), &down)
	if len(down.StopReport) != 4 || len(down.RmReport) != 4 || len(te.pods()) != 0 {
		t.Fatalf("down: %+v, pods left %v", down, te.podNames())
	}
}

// TestKubePlayKindsAndOptions covers DaemonSet, Job (with a hostPath volume), start=false,
// publishAllPorts, publishPorts, wait and the archive form.
func TestKubePlayKindsAndOptions(t *testing.T) {
	te := startEngine(t)

	ds := `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: bkp-ds}
spec:
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec:
      containers: [{name: c, image: localhost/busybox:latest, command: [sleep, "100"]}]
`
	te.play("?start=false&logDriver=k8s-file&logOptions=max-size%3D8k", ds)
	if got := strings.Join(te.podNames(), " "); got != "bkp-ds-pod:Created" {
		t.Fatalf("start=false: %q", got)
	}
	// logDriver and logOptions (podman kube play --log-driver, --log-opt)
	// reach every container.
	var lc struct {
		HostConfig struct{ LogConfig struct{ Type, Size string } }
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/bkp-ds-pod-c/json", nil), &lc)
	if lc.HostConfig.LogConfig.Type != "k8s-file" || lc.HostConfig.LogConfig.Size != "8.192kB" {
		t.Errorf("the played container's log configuration: %+v", lc.HostConfig.LogConfig)
	}
	te.Must(http.StatusOK, "DELETE", "/kube/play", strings.NewReader(ds))

	out := filepath.Join(t.TempDir(), "made")
	job := fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata: {name: bkp-job}
spec:
  template:
    spec:
      restartPolicy: Never
      volumes: [{name: out, hostPath: {path: %s, type: DirectoryOrCreate}}]
      containers:
      - name: c
        image: localhost/busybox:latest
        command: [sh, -c, "echo job > /out/result; exit 3"]
        volumeMounts: [{name: out, mountPath: /out}]
`, out)
	r := te.play("?wait=true", job)
	if r.ExitCode == nil || *r.ExitCode != 3 || len(te.pods()) != 0 {
		t.Fatalf("wait: exit %v, pods %v", r.ExitCode, te.podNames())
	}
	if data, err := os.ReadFile(filepath.Join(out, "result")); err != nil || string(data) != "job\n" {
		t.Fatalf("the hostPath volume holds %q (%v)", data, err)
	}

	all, extra := testnet.FreePort(t), testnet.FreePort(t)
	pod := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: bkp-pub}
spec:
  containers:
  - name: a
    image: localhost/busybox:latest
    command: ["busybox", "httpd", "-f", "-p", "%d", "-h", "/etc"]
    ports: [{containerPort: %d}]
  - name: b
    image: localhost/busybox:latest
    command: ["busybox", "httpd", "-f", "-p", "8081", "-h", "/etc"]
`, all, all)
	te.play(fmt.Sprintf("?publishAllPorts=true&publishPorts=%s", url.QueryEscape(fmt.Sprintf("127.0.0.1:%d:8081", extra))), pod)
	poll.GetWithin(t, 15*time.Second, fmt.Sprintf("http://127.0.0.1:%d/hostname", all))
	poll.GetWithin(t, 15*time.Second, fmt.Sprintf("http://127.0.0.1:%d/hostname", extra))
	te.Must(http.StatusOK, "DELETE", "/kube/play", strings.NewReader(pod))

	// An archive: play.yaml and a build context named after the image.
	archive := tartest.Of(t, "play.yaml", `apiVersion: v1
kind: Pod
metadata: {name: bkp-built, labels: {tier: from-pod}}
spec:
  restartPolicy: Never
  containers: [{name: c, image: localhost/bkp-built:1, command: [cat, /built]}]
`,
		"bkp-built/Containerfile", "FROM localhost/busybox:latest\nLABEL org.berth.built=yes tier=from-image\nCOPY built /built\n",
		"bkp-built/built", "built-from-archive\n")
	status, body := te.Raw("POST", "/kube/play", "application/x-tar", bytes.NewReader(archive))
	if status != http.StatusOK {
		t.Fatalf("archive play: %d %s", status, body)
	}
	var ar playReport
	json.Unmarshal(body, &ar)
	var code int
	json.Unmarshal(te.Must(http.StatusOK, "POST", "/containers/"+ar.Pods[0].Containers[0]+"/wait", nil), &code)
	logs := te.Must(http.StatusOK, "GET", "/containers/"+ar.Pods[0].Containers[0]+"/logs?stdout=true", nil)
	if code != 0 || !bytes.Contains(logs, []byte("built-from-archive")) {
		t.Fatalf("built image ran with %d: %q", code, logs)
	}
	// The Containerfile's LABEL lines are on the image and on the
	// container; the pod's label wins where both set one.
	var img struct{ Labels map[string]string }
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/images/localhost/bkp-built:1/json", nil), &img)
	var ctr struct {
		Config struct{ Labels map[string]string }
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+ar.Pods[0].Containers[0]+"/json", nil), &ctr)
	if img.Labels["org.berth.built"] != "yes" || ctr.Config.Labels["org.berth.built"] != "yes" || ctr.Config.Labels["tier"] != "from-pod" {
		t.Fatalf("labels of the built image %v and its container %v", img.Labels, ctr.Config.Labels)
	}
}

// TestKubePlayRefusals checks the 4xx answers: each names the document
// and field (or parameter), and a play that fails half way leaves nothing.
func TestKubePlayRefusals(t *testing.T) {
	te := startEngine(t)
	pod := func(name, image string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\nspec:\n  containers: [{name: c, image: %s, command: [sleep, \"100\"]}]\n", name, image)
	}
	cases := []struct {
		name, query, yaml string
		status            int
		want              []string
	}{
		{"not kubernetes", "", "hello: world\n", 400, []string{"document 0", "kind"}},
		{"unknown kind", "", "apiVersion: v1\nkind: Gadget\nmetadata: {name: g}\n", 400, []string{"document 0 (Gadget g)", "kind"}},
		{"missing image", "", pod("bkp-ok", "localhost/busybox:latest") + "---\n" + pod("bkp-missing", "localhost/bkp-nothing:1") + "---\n", 400, []string{"document 1 (Pod bkp-missing)", "spec.containers[0].image"}},
		{"never pull", "", strings.Replace(pod("bkp-never", "localhost/bkp-nothing:1"), "image:", "imagePullPolicy: Never, image:", 1), 400, []string{"imagePullPolicy Never"}},
		{"unsupported field", "", strings.Replace(pod("bkp-f", "localhost/busybox:latest"), "spec:\n", "spec:\n  nodeSelector: {a: b}\n", 1), 400, []string{"spec.nodeSelector"}},
		{"missing configmap", "", strings.Replace(pod("bkp-cm", "localhost/busybox:latest"), "command:", "envFrom: [{configMapRef: {name: nope}}], command:", 1), 400, []string{"envFrom[0]", "nope"}},
		{"log driver", "?logDriver=syslog", pod("bkp-l", "localhost/busybox:latest"), 400, []string{"logDriver"}},
		{"log option", "?logOptions=path%3D%2Fx", pod("bkp-lo", "localhost/busybox:latest"), 400, []string{"logOptions", "path"}},
		{"log tag without journald", "?logOptions=tag%3Dt", pod("bkp-lt", "localhost/busybox:latest"), 400, []string{"log_configuration.tag"}},
		{"userns", "?userns=keep-id", pod("bkp-u", "localhost/busybox:latest"), 400, []string{"userns"}},
		{"no hosts", "?noHosts=true", pod("bkp-h", "localhost/busybox:latest"), 400, []string{"noHosts"}},
		{"static ip", "?staticIPs=notanip", pod("bkp-i", "localhost/busybox:latest"), 400, []string{"staticIPs"}},
		{"publish", "?publishPorts=x:y:z:w", pod("bkp-p", "localhost/busybox:latest"), 400, []string{"publishPorts"}},
		{"service container not started", "?serviceContainer=true&start=false", pod("bkp-s", "localhost/busybox:latest"), 400, []string{"serviceContainer"}},
		{"sd-notify", "", strings.Replace(pod("bkp-n", "localhost/busybox:latest"), "metadata: {", "metadata: {annotations: {io.containers.sdnotify/c: conmon}, ", 1), 400, []string{"io.containers.sdnotify/c", "NOTIFY_SOCKET"}},
		{"client file", "?authfile=/root/auth.json", pod("bkp-a", "localhost/busybox:latest"), 400, []string{"authfile"}},
		{"content type", "", pod("bkp-c", "localhost/busybox:latest"), 400, []string{"Content-Type"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ct := ""
			if c.name == "content type" {
				ct = "image/png"
			}
			status, body := te.Raw("POST", "/kube/play"+c.query, ct, strings.NewReader(c.yaml))
			if status != c.status {
				t.Fatalf("status %d, want %d: %s", status, c.status, body)
			}
			for _, w := range c.want {
				if !strings.Contains(string(body), w) {
					t.Errorf("answer does not name %q: %s", w, body)
				}
			}
			if p := te.pods(); len(p) != 0 {
				t.Fatalf("a refused play left pods: %v", te.podNames())
			}
		})
	}

	// A failure after the first pod exists (the second pod's name is
	// taken) removes the first pod, its ConfigMap volume and the secret.
	te.play("", pod("bkp-taken", "localhost/busybox:latest"))
	half := `apiVersion: v1
kind: ConfigMap
metadata: {name: bkp-half-cm}
data: {a: "1"}
---
apiVersion: v1
kind: Secret
metadata: {name: bkp-half-secret}
stringData: {a: "1"}
---
apiVersion: v1
kind: Pod
metadata: {name: bkp-first}
spec:
  volumes: [{name: cm, configMap: {name: bkp-half-cm}}]
  containers: [{name: c, image: localhost/busybox:latest, command: [sleep, "100"], volumeMounts: [{name: cm, mountPath: /cm}]}]
---
` + pod("bkp-taken", "localhost/busybox:latest")
	status, body := te.Raw("POST", "/kube/play", "", strings.NewReader(half))
	if status != http.StatusConflict {
		t.Fatalf("half play: %d %s", status, body)
	}
	if got := strings.Join(te.podNames(), " "); got != "bkp-taken:Running" {
		t.Fatalf("pods after a failed play: %q", got)
	}
	if v := te.names("/volumes/json", "Name"); contains(v, "bkp-half-cm") {
		t.Fatalf("volumes after a failed play: %v", v)
	}
	if s := te.names("/secrets/json", "Spec"); contains(s, "bkp-half-secret") {
		t.Fatalf("secrets after a failed play: %v", s)
	}
	var ctrs []map[string]any
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/json?all=true", nil), &ctrs)
	if len(ctrs) != 2 {
		t.Fatalf("containers after a failed play: %d", len(ctrs))
	}
	// A down of pods already gone removes nothing and answers 200, as
	// Podman's (its stop and removal ignore missing pods).
	status, body = te.Raw("DELETE", "/kube/play", "", strings.NewReader(pod("bkp-nowhere", "x")))
	var gone struct {
		StopReport, RmReport []json.RawMessage
	}
	json.Unmarshal(body, &gone)
	if status != http.StatusOK || len(gone.StopReport) != 0 || len(gone.RmReport) != 0 || !strings.Contains(string(body), `"StopReport":[]`) {
		t.Fatalf("down of nothing: %d %s", status, body)
	}
}
