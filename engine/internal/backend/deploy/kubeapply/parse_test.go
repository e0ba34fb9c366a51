package kubeapply

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/core"
)

// TestParseObjects: which YAML streams become objects and which are
// refused, naming the document and field.
func TestParseObjects(t *testing.T) {
	for _, tc := range []struct {
		name  string
		yaml  string
		kinds []string
		err   string
	}{
		{"one", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n", []string{"ConfigMap"}, ""},
		{"several with blanks", "# head\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i}]}\n---\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n", []string{"Pod", "Deployment"}, ""},
		{"status dropped", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, creationTimestamp: \"2024-01-01T00:00:00Z\"}\nstatus: {}\n", []string{"Pod"}, ""},
		{"empty", "", nil, "no Kubernetes object"},
		{"comments", "# a\n# b\n", nil, "no Kubernetes object"},
		{"unknown kind", "apiVersion: v1\nkind: Gizmo\nmetadata: {name: g}\n", nil, "document 1: kind Gizmo"},
		{"unknown field", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\ndatum: {}\n", nil, "document 2: ConfigMap"},
		{"duplicate field", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\nmetadata: {name: b}\n", nil, "document 1"},
		{"no name", "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n", nil, "metadata.name"},
		{"not a mapping", "- a\n- b\n", nil, "document 1"},
		{"wrong type", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: 3}\n", nil, "document 1: Pod"},
	} {
		objs, err := ParseObjects([]byte(tc.yaml))
		if tc.err != "" {
			if err == nil || !errors.Is(err, core.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want an invalid argument naming %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		var kinds []string
		for _, o := range objs {
			kinds = append(kinds, o.GetKind())
			if _, found := o.Object["status"]; found {
				t.Errorf("%s: status kept", tc.name)
			}
		}
		if strings.Join(kinds, ",") != strings.Join(tc.kinds, ",") {
			t.Errorf("%s: kinds %v, want %v", tc.name, kinds, tc.kinds)
		}
	}
}

// FuzzParseObjects: any body parses or is refused as an invalid argument,
// never panics, and every object it returns has a kind and a name.
func FuzzParseObjects(f *testing.F) {
	f.Add([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: v}\n"))
	f.Add([]byte("---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {replicas: 2}\n---\n"))
	f.Add([]byte("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"}}"))
	f.Add([]byte("a: &x [*x]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := ParseObjects(data)
		if err != nil {
			if !errors.Is(err, core.ErrInvalidArgument) {
				t.Fatalf("error %v is not an invalid argument", err)
			}
			return
		}
		for _, o := range objs {
			if o.GetKind() == "" || o.GetName() == "" {
				t.Fatalf("object without kind or name: %v", o.Object)
			}
		}
	})
}

// TestClientConfig: kubeconfigs the engine accepts and refuses.
func TestClientConfig(t *testing.T) {
	base := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:6443\"%s}}]\n" +
		"users: [{name: u, user: {%s}}]\ncontexts: [{name: x, context: {cluster: c, user: u%s}}]\ncurrent-context: x\n"
	for _, tc := range []struct {
		name, cluster, user, ctx, ns string
		wantNS, err                  string
	}{
		{name: "token", user: "token: t", wantNS: "default"},
		{name: "context namespace", user: "token: t", ctx: ", namespace: team", wantNS: "team"},
		{name: "namespace parameter wins", user: "token: t", ctx: ", namespace: team", ns: "other", wantNS: "other"},
		{name: "exec plugin", user: "exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/true}", err: "credential plugin"},
		{name: "relative token file", user: "tokenFile: token", err: "relative path"},
		{name: "relative CA", cluster: ", certificate-authority: ca.crt", user: "token: t", err: "relative path"},
	} {
		data := []byte(fmt.Sprintf(base, tc.cluster, tc.user, tc.ctx))
		cfg, ns, err := clientConfig(data, tc.ns)
		if tc.err != "" {
			if err == nil || !errors.Is(err, core.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want one naming %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || ns != tc.wantNS || cfg.Host != "https://127.0.0.1:6443" || cfg.BearerToken != "t" {
			t.Errorf("%s: %+v %q %v", tc.name, cfg, ns, err)
		}
	}
	if _, _, err := clientConfig([]byte("\x00not yaml"), ""); !errors.Is(err, core.ErrInvalidArgument) {
		t.Errorf("garbage: %v", err)
	}
}
