package kubeapi

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/poll"
	"github.com/berth-project/berth/shared/testnet"
)

// webYAML is a Pod serving /etc over HTTP on a host port, with a
// ConfigMap (env and a volume), a Secret (env), a claim and an emptyDir.
func webYAML(port int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: bkp-web-config
data:
  GREETING: hello
  index.html: from-configmap
---
apiVersion: v1
kind: Secret
metadata:
  name: bkp-web-secret
stringData:
  password: s3cret
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: bkp-web-data
spec:
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: 1Gi
---
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels:
    app: web
  annotations:
    team: berth
spec:
  restartPolicy: Always
  initContainers:
  - name: init
    image: localhost/busybox:latest
    command: ["sh", "-c", "echo initialized > /data/init"]
    volumeMounts:
    - name: data
      mountPath: /data
  containers:
  - name: srv
    image: localhost/busybox:latest
    command: ["busybox", "httpd", "-f", "-p", "8080", "-h", "/site"]
    ports:
    - containerPort: 8080
      hostPort: %d
      hostIP: 127.0.0.1
    env:
    - name: GREETING
      valueFrom:
        configMapKeyRef: {name: bkp-web-config, key: GREETING}
    - name: PASSWORD
      valueFrom:
        secretKeyRef: {name: bkp-web-secret, key: password}
    - name: POD
      valueFrom:
        fieldRef: {fieldPath: metadata.name}
    resources:
      limits:
        memory: 64Mi
    securityContext:
      capabilities:
        drop: [CHOWN]
    livenessProbe:
      exec:
        command: ["true"]
      periodSeconds: 30
    volumeMounts:
    - name: site
      mountPath: /site
      readOnly: true
    - name: data
      mountPath: /data
    - name: scratch
      mountPath: /scratch
  volumes:
  - name: site
    configMap:
      name: bkp-web-config
  - name: data
    persistentVolumeClaim:
      claimName: bkp-web-data
  - name: scratch
    emptyDir: {}
`, port)
}

// TestPodmanKubePlayDown plays a Pod with the podman 4.3.1 client, checks
// what it made (published port, env from ConfigMap, Secret and field refs,
// the ConfigMap volume, the init container's work on the claim, limits,
// capabilities, healthcheck), replaces it, tears it down, and checks that
// nothing of it is left.
func TestPodmanKubePlayDown(t *testing.T) {
	te := startEngine(t)
	port := testnet.FreePort(t)
	file := writeFile(t, "web.yaml", webYAML(port))

	out := te.MustPodman("kube", "play", file)
	if !strings.Contains(out, "Pod:") || !strings.Contains(out, "Volumes:\nbkp-web-data") {
		t.Fatalf("kube play printed:\n%s", out)
	}
	if got := poll.GetWithin(t, 15*time.Second, fmt.Sprintf("http://127.0.0.1:%d/index.html", port)); got != "from-configmap" {
		t.Fatalf("served %q", got)
	}
	env := te.MustPodman("exec", "web-srv", "env")
	for _, want := range []string{"GREETING=hello", "PASSWORD=s3cret", "POD=web"} {
		if !strings.Contains(env, want) {
			t.Errorf("env lacks %s:\n%s", want, env)
		}
	}
	if got := te.MustPodman("exec", "web-srv", "cat", "/data/init"); strings.TrimSpace(got) != "initialized" {
		t.Errorf("the init container's file: %q", got)
	}
	inspect := te.MustPodman("inspect", "web-srv", "--format", "{{.HostConfig.Memory}} {{.HostConfig.CapDrop}} {{.Config.Healthcheck.Test}} {{.Config.Annotations.team}} {{.HostConfig.RestartPolicy.Name}}")
	for _, want := range []string{"67108864", "CHOWN", "CMD true", "berth", "always"} {
		if !strings.Contains(inspect, want) {
			t.Errorf("inspect lacks %q: %s", want, inspect)
		}
	}
	if out := te.MustPodman("secret", "ls"); !strings.Contains(out, "bkp-web-secret") {
		t.Errorf("secret ls:\n%s", out)
	}
	if out := te.MustPodman("ps", "-a", "--format", "{{.Names}}"); strings.Contains(out, "web-init") {
		t.Errorf("the init container stayed:\n%s", out)
	}
	first := te.pods()

	out = te.MustPodman("kube", "play", "--replace", file)
	if !strings.Contains(out, "Pods removed:\n"+first[0].ID) {
		t.Fatalf("kube play --replace printed:\n%s", out)
	}
	poll.GetWithin(t, 15*time.Second, fmt.Sprintf("http://127.0.0.1:%d/index.html", port))
	ctrs := te.names("/containers/json?all=true", "Id")

	out = te.MustPodman("kube", "down", file)
	if !strings.Contains(out, "Pods stopped:") || !strings.Contains(out, "Pods removed:") {
		t.Fatalf("kube down printed:\n%s", out)
	}
	if p := te.pods(); len(p) != 0 {
		t.Fatalf("pods after down: %+v", p)
	}
	if s := te.names("/secrets/json", "Spec"); len(s) != 0 {
		t.Fatalf("secrets after down: %v", s)
	}
	eventually(t, 10*time.Second, "leftovers after kube down", func() (bool, string) {
		l := te.Leaks(nil, ctrs)
		return len(l) == 0, strings.Join(l, "\n")
	})
	// Without force the claim's volume stays, with it it goes.
	if v := te.names("/volumes/json", "Name"); !contains(v, "bkp-web-data") {
		t.Fatalf("volumes after down: %v", v)
	}
	// A second down finds nothing and removes nothing, as Podman's.
	if out, err := te.Podman("kube", "down", file); err != nil || strings.Contains(out, first[0].ID) {
		t.Fatalf("second down: %v\n%s", err, out)
	}
	te.MustPodman("kube", "play", file)
	te.Must(200, "DELETE", "/kube/play?force=true", strings.NewReader(webYAML(port)))
	if v := te.names("/volumes/json", "Name"); contains(v, "bkp-web-data") || contains(v, "bkp-web-config") {
		t.Fatalf("volumes after down with force: %v", v)
	}
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
