package networksapi

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/engine"
	"github.com/berth-project/berth/engine/internal/testsupport/benchtest"
	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
)

// The benchmarks compare Berth with Podman 4.3.1 serving the same API on the
// same machine (hack/bench.sh starts it and exports BERTH_BENCH=1,
// BERTH_BENCH_PODMAN_URL and the rlimits its containers may ask for).

// podmanEngine is a client of the reference Podman service with the test
// image loaded.
func podmanEngine(b *testing.B) *testEngine {
	te := &testEngine{Engine: enginetest.AttachPodman(b, benchtest.PodmanURL(b), busyboxImage())}
	te.Client.Timeout = 2 * time.Minute
	return te
}

// benchEngine is a Berth engine whose pool holds a whole /16 of a random
// 10.x block (the test default holds 16 networks).
func benchEngine(b *testing.B) *testEngine {
	o := networkOptions()
	o.Network = func(n *engine.NetworkConfig) {
		var x [1]byte
		rand.Read(x[:])
		n.SubnetPool = []string{fmt.Sprintf("10.%d.0.0/16", 50+int(x[0])%40)}
	}
	te := &testEngine{Engine: enginetest.Start(b, o)}
	te.Client.Timeout = 2 * time.Minute
	return te
}

// benchSpec is the create request both engines get: no network mode, so
// each puts the container on its default bridge network. Podman gives
// containers rlimits above this machine's hard limits unless asked.
func benchSpec(cmd ...string) map[string]any {
	return benchtest.Spec(nil, cmd...)
}

// BenchmarkRunTrueBridge: create + start + wait + remove of a `true`
// container on each engine's default bridge network. Goal: Berth's median
// at most 0.3x Podman's.
func BenchmarkRunTrueBridge(b *testing.B) {
	benchtest.Require(b)
	// 10 rounds; the pauses let Podman's background cleanup (and
	// Berth's) finish before the next measurement.
	enginetest.CompareRuns(b, "run true on the default bridge", "goal <= 0.3", 10, [2]time.Duration{500 * time.Millisecond, 500 * time.Millisecond},
		benchSpec("true"), benchEngine(b).Engine, podmanEngine(b).Engine)
}

// listThroughput issues GET /networks/json from 4 clients for d and answers
// requests per second. Each client checks its first answer whole (at least
// want networks); later answers count when they are as long as that one, so
// the client's own work, which both engines share, stays small.
func listThroughput(te *testEngine, d time.Duration, want int) float64 {
	var n atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	// One kept-alive connection a client, as a real client holds it (the
	// default transport keeps two idle connections a host, so four clients
	// would open a connection for about every other request).
	transport := &http.Transport{MaxIdleConnsPerHost: 4}
	defer transport.CloseIdleConnections()
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Transport: transport}
			var body bytes.Buffer
			whole := -1
			for time.Now().Before(deadline) {
				resp, err := client.Get(te.URL + "/networks/json")
				if err != nil {
					return
				}
				body.Reset()
				body.ReadFrom(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					continue
				}
				if whole < 0 {
					if bytes.Count(body.Bytes(), []byte(`"dns_enabled":`)) < want {
						continue
					}
					whole = body.Len()
				}
				if body.Len() >= whole {
					n.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return float64(n.Load()) / d.Seconds()
}

// BenchmarkListNetworks100: ListNetworks with 100 networks on each engine.
// Goal: Berth's throughput at least 10x Podman's.
func BenchmarkListNetworks100(b *testing.B) {
	benchtest.Require(b)
	berth := benchEngine(b)
	podman := podmanEngine(b)
	var x [2]byte
	rand.Read(x[:])
	prefix := fmt.Sprintf("bnl%02x%02x", x[0], x[1])
	for i := 0; i < 100; i++ {
		for _, te := range []*testEngine{berth, podman} {
			te.Must(http.StatusOK, "POST", "/networks/create", map[string]any{"name": fmt.Sprintf("%s-%d", prefix, i), "labels": map[string]string{"bench": "1"}})
		}
	}
	b.Cleanup(func() {
		for i := 0; i < 100; i++ {
			podman.Do("DELETE", fmt.Sprintf("/networks/%s-%d", prefix, i), nil)
		}
	})
	list := func(te *testEngine) func() float64 {
		return func() float64 { return listThroughput(te, 3*time.Second, 100) }
	}
	benchtest.CompareRates(b, "list 100 networks", "goal >= 10", list(berth), list(podman))
}
