package kubegenapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-project/berth/engine/internal/testsupport/kubetest"
)

// bodyYAML is what a client sends to kube apply: a namespace and objects in it.
var bodyYAML = `apiVersion: v1
kind: Namespace
metadata:
  name: bkg-apply
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: bkg-settings
  namespace: bkg-apply
data:
  greeting: hello
---
` + kubetest.Deployment("bkg-web", "bkg-apply", 2, `- name: web
  image: localhost/busybox:latest
  command: [sleep, "1000"]
`)

// apply posts YAML to kube apply with the query and returns the status and body.
func (te *testEngine) apply(query url.Values, yaml string) (int, string) {
	te.T.Helper()
	status, body := te.Do("POST", "/kube/apply?"+query.Encode(), strings.NewReader(yaml))
	return status, string(body)
}

// TestKubeApplyToAPIServer: kube apply creates body YAML's objects and the
// YAML generated for a pod and a volume on a real kube-apiserver, updates
// them on a second apply, honours namespace and caCertFile, and refuses
// bad kubeconfigs and objects the server finds invalid, naming them.
func TestKubeApplyToAPIServer(t *testing.T) {
	te := startEngine(t)
	c := startCluster(t)
	ctx := context.Background()
	kubeconfig := c.kubeconfig(t, true)

	// Body YAML; applied twice (the second an update: the ConfigMap changes).
	q := url.Values{"kubeConfig": {kubeconfig}}
	if status, body := te.apply(q, bodyYAML); status != http.StatusOK || body != "Deployed!\n" {
		t.Fatalf("apply: %d %s", status, body)
	}
	if status, body := te.apply(q, strings.Replace(bodyYAML, "greeting: hello", "greeting: goodbye", 1)); status != http.StatusOK {
		t.Fatalf("second apply: %d %s", status, body)
	}
	cm, err := c.client.CoreV1().ConfigMaps("bkg-apply").Get(ctx, "bkg-settings", metav1.GetOptions{})
	if err != nil || cm.Data["greeting"] != "goodbye" {
		t.Fatalf("configmap after apply: %+v, %v", cm, err)
	}
	dep, err := c.client.AppsV1().Deployments("bkg-apply").Get(ctx, "bkg-web", metav1.GetOptions{})
	if err != nil || *dep.Spec.Replicas != 2 || dep.ManagedFields[0].Manager != "berth-engine" {
		t.Fatalf("deployment after apply: %+v, %v", dep, err)
	}

	// Generated from names, with its Service, into the namespace asked for,
	// the server verified with caCertFile instead of the kubeconfig's CA.
	webPod(te, 18225)
	q = url.Values{"kubeConfig": {c.kubeconfig(t, false)}, "caCertFile": {c.caFile}, "namespace": {"bkg-apply"},
		"namesOrIDs": {"bkgweb", "bkgdata"}, "service": {"true"}}
	if status, body := te.apply(q, ""); status != http.StatusOK {
		t.Fatalf("apply of names: %d %s", status, body)
	}
	pod, err := c.client.CoreV1().Pods("bkg-apply").Get(ctx, "bkgweb", metav1.GetOptions{})
	if err != nil || pod.Spec.Containers[0].Name != "bkgweb-app" || pod.Spec.Containers[0].Env[0].Value != "hello" {
		t.Fatalf("generated pod after apply: %+v, %v", pod, err)
	}
	if _, err := c.client.CoreV1().Services("bkg-apply").Get(ctx, "bkgweb", metav1.GetOptions{}); err != nil {
		t.Fatalf("generated service after apply: %v", err)
	}
	if _, err := c.client.CoreV1().PersistentVolumeClaims("bkg-apply").Get(ctx, "bkgdata", metav1.GetOptions{}); err != nil {
		t.Fatalf("generated claim after apply: %v", err)
	}

	// Refusals: each a 4xx naming what is wrong.
	badService := "apiVersion: v1\nkind: Service\nmetadata: {name: bkg-bad}\nspec:\n  ports: [{port: 0}]\n"
	for _, tc := range []struct {
		name   string
		query  url.Values
		yaml   string
		status int
		names  string
	}{
		{"invalid object", url.Values{"kubeConfig": {kubeconfig}}, badService, http.StatusBadRequest, "Service/default/bkg-bad"},
		{"missing namespace", url.Values{"kubeConfig": {kubeconfig}, "namespace": {"bkg-nosuch"}}, strings.SplitN(bodyYAML, "---\n", 3)[1], http.StatusBadRequest, "ConfigMap/bkg-nosuch/bkg-settings"},
		{"no kubeconfig", url.Values{}, bodyYAML, http.StatusBadRequest, "kubeconfig"},
		{"relative kubeconfig", url.Values{"kubeConfig": {"kubeconfig"}}, bodyYAML, http.StatusBadRequest, "not an absolute path"},
		{"unreadable kubeconfig", url.Values{"kubeConfig": {"/nonexistent/bkg-kubeconfig"}}, bodyYAML, http.StatusBadRequest, "cannot be read"},
		{"not a kubeconfig", url.Values{"kubeConfig": {c.caFile}}, bodyYAML, http.StatusBadRequest, "kubeconfig"},
		{"ca not PEM", url.Values{"kubeConfig": {kubeconfig}, "caCertFile": {kubeconfig}}, bodyYAML, http.StatusBadRequest, "no PEM certificate"},
		{"not kubernetes", url.Values{"kubeConfig": {kubeconfig}}, "kind: Gizmo\napiVersion: v1\nmetadata: {name: x}\n", http.StatusBadRequest, "document 1"},
		{"unknown field", url.Values{"kubeConfig": {kubeconfig}}, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndatum: {}\n", http.StatusBadRequest, "datum"},
		{"empty", url.Values{"kubeConfig": {kubeconfig}}, "# nothing\n", http.StatusBadRequest, "no Kubernetes object"},
		{"body and names", url.Values{"kubeConfig": {kubeconfig}, "namesOrIDs": {"bkgweb"}}, bodyYAML, http.StatusBadRequest, "namesOrIDs"},
		{"unknown name", url.Values{"kubeConfig": {kubeconfig}, "namesOrIDs": {"bkgnosuch"}}, "", http.StatusNotFound, "bkgnosuch"},
		{"file", url.Values{"kubeConfig": {kubeconfig}, "file": {"/etc/hostname"}}, "", http.StatusBadRequest, "file"},
	} {
		status, body := te.apply(tc.query, tc.yaml)
		var e struct{ Message string }
		json.Unmarshal([]byte(body), &e)
		if status != tc.status || !strings.Contains(e.Message, tc.names) {
			t.Errorf("%s: %d %s, want %d naming %s", tc.name, status, body, tc.status, tc.names)
		}
	}
	if _, err := c.client.CoreV1().Services("default").Get(ctx, "bkg-bad", metav1.GetOptions{}); err == nil {
		t.Error("the invalid Service exists")
	}
}
