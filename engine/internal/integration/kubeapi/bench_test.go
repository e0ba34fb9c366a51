package kubeapi

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/benchtest"
	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/kubetest"
)

// The benchmark compares Berth with Podman 4.3.1 serving the same API on the
// same machine (hack/bench.sh starts it and exports BERTH_BENCH=1 and
// BERTH_BENCH_PODMAN_URL).

// benchYAML is a 3-replica Deployment behind a Service: three pods on the
// default kube network, each with its infra container and one member.
var benchYAML = kubetest.Deployment("bkp-bench", "", 3, `- name: srv
  image: localhost/busybox:latest
  command: ["/bin/sleep", "600"]
`) + `---
apiVersion: v1
kind: Service
metadata: {name: bkp-bench}
spec:
  selector: {app: bkp-bench}
  ports: [{port: 80}]
`

// kubeCycle plays benchYAML and tears it down, returning both durations.
func kubeCycle(te *testEngine) (play, down time.Duration) {
	start := time.Now()
	te.Must(http.StatusOK, "POST", "/play/kube", strings.NewReader(benchYAML))
	play = time.Since(start)
	start = time.Now()
	te.Must(http.StatusOK, "DELETE", "/play/kube", strings.NewReader(benchYAML))
	return play, time.Since(start)
}

// BenchmarkKubePlayDown: kube play of a 3-pod Deployment and a Service, then
// kube down, against Berth and Podman alternately. Goal: Berth's medians at
// most 0.3x Podman's.
func BenchmarkKubePlayDown(b *testing.B) {
	u := benchtest.PodmanURL(b)
	berth := startEngine(b)
	podman := &testEngine{enginetest.Attach(b, strings.TrimPrefix(u, "tcp://"))}
	podman.Load(enginetest.BusyboxImage())
	b.Cleanup(func() { podman.Do("DELETE", "/play/kube", strings.NewReader(benchYAML)) })
	const rounds = 5
	kubeCycle(berth) // warm up both (infra image, network, first mounts)
	kubeCycle(podman)
	var bp, bd, pp, pd []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := 0; j < rounds; j++ {
			p, d := kubeCycle(berth)
			bp, bd = append(bp, p), append(bd, d)
			time.Sleep(300 * time.Millisecond)
			p, d = kubeCycle(podman)
			pp, pd = append(pp, p), append(pd, d)
			time.Sleep(300 * time.Millisecond)
		}
	}
	b.StopTimer()
	mbp, mbd, mpp, mpd := benchtest.Median(bp), benchtest.Median(bd), benchtest.Median(pp), benchtest.Median(pd)
	b.ReportMetric(float64(mbp.Microseconds())/1000, "berth-play-ms")
	b.ReportMetric(float64(mpp.Microseconds())/1000, "podman-play-ms")
	b.ReportMetric(float64(mbp)/float64(mpp), "play-ratio")
	b.ReportMetric(float64(mbd.Microseconds())/1000, "berth-down-ms")
	b.ReportMetric(float64(mpd.Microseconds())/1000, "podman-down-ms")
	b.ReportMetric(float64(mbd)/float64(mpd), "down-ratio")
	fmt.Printf("kube play (3-pod Deployment + Service): berth median %v, podman median %v, ratio %.3f; kube down: berth %v, podman %v, ratio %.3f (goal <= 0.3) over %d runs each\n",
		mbp, mpp, float64(mbp)/float64(mpp), mbd, mpd, float64(mbd)/float64(mpd), len(bp))
}
