package podsapi

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/benchtest"
	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
)

// The benchmarks compare Berth with Podman 4.3.1 serving the same API on the
// same machine (hack/bench.sh starts it and exports BERTH_BENCH=1 and
// BERTH_BENCH_PODMAN_URL).

// podmanEngine returns a client of the reference Podman service, with the
// busybox test image loaded.
func podmanEngine(b *testing.B) *testEngine {
	return &testEngine{enginetest.AttachPodman(b, benchtest.PodmanURL(b), enginetest.BusyboxImage())}
}

// podCycle creates, starts and force-removes one empty pod. With network
// false both engines get the pod without a network (netns none), so the
// cycle measures the pod and its infra container alone; with network true
// the pod is made as `podman pod create` makes it by default, on the
// default bridge network.
func podCycle(te *testEngine, n int, network bool) time.Duration {
	spec := map[string]any{"name": fmt.Sprintf("cycle%d", n)}
	if !network {
		spec["netns"] = map[string]string{"nsmode": "none"}
	}
	start := time.Now()
	id := te.CreatePod(spec)
	te.Must(http.StatusOK, "POST", "/pods/"+id+"/start", nil)
	te.Must(http.StatusOK, "DELETE", "/pods/"+id+"?force=true", nil)
	return time.Since(start)
}

// BenchmarkPodCycleVsPodman: pod create + pod start + pod rm -f of an empty
// pod without a network. Goal: Berth's median at most 0.3x Podman's.
func BenchmarkPodCycleVsPodman(b *testing.B) {
	benchtest.Require(b)
	benchPodCycle(b, startEngine(b), false)
}

// BenchmarkPodCycleBridgeVsPodman: the same cycle of a pod as `podman pod
// create` makes it by default: on the default bridge network, so both
// engines set up and tear down the infra container's network too.
func BenchmarkPodCycleBridgeVsPodman(b *testing.B) {
	benchtest.Require(b)
	benchPodCycle(b, startBridgedEngine(b), true)
}

func benchPodCycle(b *testing.B, berth *testEngine, network bool) {
	podman := podmanEngine(b)
	const rounds = 9
	// The warm-up (n = -1) pulls the infra image and makes the first mounts
	// and the bridge.
	benchtest.Compare(b, fmt.Sprintf("pod create+start+rm -f (network %v)", network), "goal <= 0.3", "runs", rounds, [2]time.Duration{200 * time.Millisecond, 500 * time.Millisecond},
		func(n int) time.Duration { return podCycle(berth, n, network) },
		func(n int) time.Duration { return podCycle(podman, n, network) })
}

// BenchmarkPodListVsPodman: pod ps with 50 pods of 2 containers (the infra
// container and one more). Goal: throughput at least 10x Podman's.
func BenchmarkPodListVsPodman(b *testing.B) {
	benchtest.Require(b)
	berth := startEngine(b)
	podman := podmanEngine(b)
	const pods = 50
	for _, te := range []*testEngine{berth, podman} {
		for i := 0; i < pods; i++ {
			name := fmt.Sprintf("list%d", i)
			te.CreatePod(map[string]any{"name": name, "netns": map[string]string{"nsmode": "none"}, "labels": map[string]string{"bench": "list"}})
			te.createIn(name, name+"-app", "busybox", "sleep", "600")
		}
	}
	list := func(te *testEngine) func() float64 {
		return func() float64 { return benchtest.ListThroughput(te.URL+"/pods/json", pods, 2*time.Second) }
	}
	benchtest.CompareRates(b, "pod ps, 50 pods of 2 containers", "goal >= 10", list(berth), list(podman))
}
