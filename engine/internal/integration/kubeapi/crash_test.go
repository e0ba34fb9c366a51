package kubeapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/shared/testnet"
)

// TestKubeDownAfterEngineKill plays a Deployment with a service
// container, kills the engine with SIGKILL, starts it again and checks
// that kube down removes every pod and container the play made, the
// service container included, leaving no conmon, runc state, mount or
// network namespace behind.
func TestKubeDownAfterEngineKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the engine binary")
	}
	p := enginetest.StartProcess(t, kubeOptions())
	te, root, runRoot := &testEngine{p.Engine}, p.Root, p.RunRoot

	yaml := deploymentYAML(testnet.FreePort(t))
	r := te.play("?serviceContainer=true", yaml)
	ids := []string{r.ServiceContainerID}
	for _, p := range r.Pods {
		ids = append(ids, p.Containers...)
		var pod struct{ InfraContainerID string }
		json.Unmarshal(te.Must(http.StatusOK, "GET", "/pods/"+p.ID+"/json", nil), &pod)
		ids = append(ids, pod.InfraContainerID)
	}
	if len(r.Pods) != 4 || len(ids) != 9 || r.ServiceContainerID == "" {
		t.Fatalf("play made %d pods, %d containers", len(r.Pods), len(ids))
	}

	p.Kill9()
	p.Start()

	if got := strings.Join(te.podNames(), " "); got != "bkp-app-pod-0:Running bkp-app-pod-1:Running bkp-app-pod-2:Running bkp-single:Running" {
		t.Fatalf("pods after the restart: %q", got)
	}
	var svc struct{ State struct{ Status string } }
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+r.ServiceContainerID+"/json", nil), &svc)
	if svc.State.Status != "running" {
		t.Fatalf("service container after the restart: %s", svc.State.Status)
	}
	te.Must(http.StatusOK, "DELETE", "/kube/play", strings.NewReader(yaml))
	if p := te.pods(); len(p) != 0 {
		t.Fatalf("pods after down: %v", te.podNames())
	}
	var ctrs []map[string]any
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/json?all=true", nil), &ctrs)
	if len(ctrs) != 0 {
		t.Fatalf("containers after down: %d", len(ctrs))
	}
	eventually(t, 10*time.Second, "leftovers after kube down", func() (bool, string) {
		l := enginetest.Leaks(root, runRoot, nil, ids)
		return len(l) == 0, strings.Join(l, "\n")
	})
}
