package quadletsapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/benchtest"
	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
)

// BenchmarkQuadletActivationVsPodman: install and activate a .container
// unit, then remove it with force (create, start, stop, remove of its
// container), against what the service Podman's generator makes of the
// same unit asks of Podman 4.3.1 (podman run -d --replace --rm, then
// podman rm -f): container create, start, then forced removal. hack/bench.sh
// starts the Podman service and exports BERTH_BENCH=1 and
// BERTH_BENCH_PODMAN_URL. The issue sets no goal; the ratio is reported.
func BenchmarkQuadletActivationVsPodman(b *testing.B) {
	u := benchtest.PodmanURL(b)
	berth := startEngine(b)
	podman := &testEngine{enginetest.AttachPodman(b, u, enginetest.BusyboxImage())}

	unit := "[Container]\nImage=localhost/busybox:latest\nNetwork=none\nExec=sleep 1000\nStopTimeout=0\n"
	berthCycle := func(n int) time.Duration {
		name := fmt.Sprintf("bqa-bench%d.container", n)
		start := time.Now()
		berth.Must(http.StatusOK, "POST", "/quadlets?activate=true", tarOf(b, name, unit))
		berth.Must(http.StatusOK, "DELETE", "/quadlets/"+name+"?force=true", nil)
		return time.Since(start)
	}
	spec := benchtest.Spec(map[string]any{"netns": map[string]string{"nsmode": "none"}, "stop_timeout": 0}, "sleep", "1000")
	podmanCycle := func(n int) time.Duration {
		spec["name"] = fmt.Sprintf("systemd-bqa-bench%d", n)
		start := time.Now()
		var created struct {
			ID string `json:"Id"`
		}
		json.Unmarshal(podman.Must(http.StatusCreated, "POST", "/containers/create", spec), &created)
		podman.Must(http.StatusNoContent, "POST", "/containers/"+created.ID+"/start", nil)
		podman.Must(http.StatusOK, "DELETE", "/containers/"+created.ID+"?force=true&timeout=0", nil)
		return time.Since(start)
	}
	const rounds = 7
	benchtest.Compare(b, "quadlet activate+force-remove of a .container vs podman create+start+rm -f", "", "runs", rounds, [2]time.Duration{200 * time.Millisecond, 200 * time.Millisecond}, berthCycle, podmanCycle)
}
