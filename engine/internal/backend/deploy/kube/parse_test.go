package kube

import (
	"errors"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/core"
)

const podYAML = `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: srv
    image: localhost/busybox:latest
`

// TestEveryKindDecodes: each kind that has a shape has an API version and
// an object to decode into, and only those.
func TestEveryKindDecodes(t *testing.T) {
	for kind := range shapes {
		k, ok := kinds[kind]
		if !ok || k.apiVersion == "" || k.target(&document{}) == nil {
			t.Errorf("kind %s: no API version or no object to decode into", kind)
		}
	}
	if len(kinds) != len(shapes) {
		t.Errorf("%d kinds decode, %d have shapes", len(kinds), len(shapes))
	}
}

func TestParseDocumentsAcceptsKinds(t *testing.T) {
	yaml := podYAML + `---
# a comment only
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: dep
spec:
  replicas: 2
  selector:
    matchLabels: {app: dep}
  template:
    metadata:
      labels: {app: dep}
    spec:
      containers:
      - name: c
        image: busybox
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm}
data: {A: "1"}
---
apiVersion: v1
kind: Secret
metadata: {name: sec}
data: {pw: aGVsbG8=}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: claim}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Service
metadata: {name: svc}
spec:
  type: NodePort
  selector: {app: dep}
  ports: [{port: 80, nodePort: 30080}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: ds}
spec:
  selector: {matchLabels: {a: b}}
  template:
    spec:
      containers: [{name: c, image: busybox}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: job}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox}]
`
	docs, err := parseDocuments([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, d := range docs {
		kinds = append(kinds, d.Kind+"/"+d.Name)
	}
	want := "Pod/web Deployment/dep ConfigMap/cm Secret/sec PersistentVolumeClaim/claim Service/svc DaemonSet/ds Job/job"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("kinds %q, want %q", got, want)
	}
	if string(docs[3].Secret.Data["pw"]) != "hello" {
		t.Fatalf("secret data %q", docs[3].Secret.Data["pw"])
	}
	if got := podNames(docs); strings.Join(got, " ") != "web dep-pod-0 dep-pod-1 ds-pod job-pod" {
		t.Fatalf("pod names %q", got)
	}
}

// TestParseDocumentsRefuses checks that bad input is an ErrInvalidArgument
// naming the document and the field.
func TestParseDocumentsRefuses(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"not yaml", "a: [b\n", []string{"document 0", "not YAML"}},
		{"scalar", "hello\n", []string{"document 0", "not a Kubernetes object"}},
		{"no kind", "apiVersion: v1\nmetadata: {name: x}\n", []string{"document 0", "kind"}},
		{"unknown kind", "apiVersion: v1\nkind: Gadget\nmetadata: {name: x}\n", []string{"document 0 (Gadget x)", "kind", "Gadget"}},
		{"wrong apiVersion", "apiVersion: v2\nkind: Pod\nmetadata: {name: x}\n", []string{"(Pod x)", "apiVersion"}},
		{"unknown field", podYAML + "  nodeName: n1\n", []string{"(Pod web)", "spec.nodeName"}},
		{"unsupported container field", strings.Replace(podYAML, "    image:", "    lifecycle: {}\n    image:", 1), []string{"spec.containers[0].lifecycle"}},
		{"second document", podYAML + "---\napiVersion: v1\nkind: Pod\nmetadata: {name: b}\nspec: {containers: [{name: c, image: i, stdin: maybe}]}\n", []string{"document 1 (Pod b)", "stdin"}},
		{"no name", "apiVersion: v1\nkind: Pod\nmetadata: {}\nspec: {containers: [{name: c, image: i}]}\n", []string{"metadata.name", "missing"}},
		{"bad name", "apiVersion: v1\nkind: Pod\nmetadata: {name: 'a b'}\n", []string{"metadata.name"}},
		{"namespace", "apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: prod}\n", []string{"metadata.namespace", "prod"}},
		{"empty", "---\n---\n", []string{"body", "no Kubernetes document"}},
		{"wrong type", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: 3}\n", []string{"(Pod a)", "containers"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseDocuments([]byte(c.yaml))
			if !errors.Is(err, core.ErrInvalidArgument) {
				t.Fatalf("err %v, want ErrInvalidArgument", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not name %q", err, w)
				}
			}
		})
	}
}

func TestParsePublish(t *testing.T) {
	cases := []struct {
		in   string
		want core.PortMapping
		bad  bool
	}{
		{in: "80", want: core.PortMapping{ContainerPort: 80, HostPort: 80, Protocol: "tcp"}},
		{in: "8080:80/udp", want: core.PortMapping{ContainerPort: 80, HostPort: 8080, Protocol: "udp"}},
		{in: "127.0.0.1:8080:80", want: core.PortMapping{HostIP: "127.0.0.1", ContainerPort: 80, HostPort: 8080, Protocol: "tcp"}},
		{in: "x:8080:80", bad: true},
		{in: "0", bad: true},
		{in: "80/icmp", bad: true},
		{in: "1:2:3:4", bad: true},
		{in: "70000", bad: true},
	}
	for _, c := range cases {
		got, err := parsePublish(c.in)
		if c.bad != (err != nil) {
			t.Fatalf("%q: err %v", c.in, err)
		}
		if !c.bad && got != c.want {
			t.Fatalf("%q: %+v, want %+v", c.in, got, c.want)
		}
	}
}
