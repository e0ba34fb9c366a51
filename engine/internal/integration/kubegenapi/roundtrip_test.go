package kubegenapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestGenerateKubeRoundTrip: the YAML kube generate writes for a pod (and,
// with service and type deployment, a Service and Deployment) plays back
// through kube play into a running pod whose container has the original's
// command and environment, and kube down removes it.
func TestGenerateKubeRoundTrip(t *testing.T) {
	te := startEngine(t)
	webPod(te, 18226)
	podYAML := string(te.must(http.StatusOK, "GET", "/kube/generate?names=bkgweb&names=bkgdata", nil))
	deployYAML := string(te.must(http.StatusOK, "GET", "/kube/generate?names=bkgweb&service=true&type=deployment", nil))
	te.must(http.StatusOK, "DELETE", "/pods/bkgweb?force=true&timeout=0", nil)
	te.must(http.StatusNoContent, "DELETE", "/volumes/bkgdata", nil)

	for _, tc := range []struct {
		name, yaml, pod string
	}{
		{"pod", podYAML, "bkgweb"},
		{"deployment", deployYAML, "bkgweb-deployment-pod-0"},
	} {
		te.must(http.StatusOK, "POST", "/kube/play", strings.NewReader(tc.yaml))
		var pod struct {
			State      string
			Containers []struct{ ID, Name string }
		}
		if err := json.Unmarshal(te.must(http.StatusOK, "GET", "/pods/"+tc.pod+"/json", nil), &pod); err != nil {
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
		if err := json.Unmarshal(te.must(http.StatusOK, "GET", "/containers/"+app+"/json", nil), &ctr); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(ctr.Config.Env, "GREETING=hello") || ctr.Path != "sleep" || !slices.Equal(ctr.Args, []string{"1000"}) {
			t.Errorf("%s: played container's env %v, process %s %v", tc.name, ctr.Config.Env, ctr.Path, ctr.Args)
		}
		te.must(http.StatusOK, "DELETE", "/kube/play?force=true", strings.NewReader(tc.yaml))
		if status, _ := te.do("GET", "/pods/"+tc.pod+"/exists", nil); status != http.StatusNotFound {
			t.Errorf("%s: pod %s still exists after kube down (%d)", tc.name, tc.pod, status)
		}
	}
}
