package transfertest

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/images/imagestore/registrytest"
	"github.com/berth-project/berth/engine/internal/testsupport/benchtest"
	"github.com/berth-project/berth/engine/testimage"
)

// benchEngine is one side of the comparison: an engine's libpod API.
type benchEngine struct {
	name string
	base string // http://host:port/v4.3.1/libpod
}

// BenchmarkTransferVsPodman measures, in one run and through the same HTTP
// API, the load of a 200 MB docker-archive, its push to a local registry and
// its pull back, on berth-engine and on Podman 4.3.1 (BERTH_BENCH_PODMAN_URL,
// a `podman system service` with its own store). Rounds alternate which
// engine goes first; each push goes to a fresh registry so neither engine
// can reuse blobs uploaded before. It reports the median of each operation
// per engine and the ratios berth/podman (at most 1.0 is the goal).
func BenchmarkTransferVsPodman(b *testing.B) {
	podmanURL := benchtest.PodmanURL(b)
	requireBusybox(b)
	podman := benchEngine{name: "podman", base: strings.Replace(podmanURL, "tcp://", "http://", 1) + "/v4.3.1/libpod"}
	berth := benchEngine{name: "berth", base: startEngine(b).URL}

	size := int64(200 << 20)
	if s := os.Getenv("BERTH_BENCH_LOAD_MB"); s != "" {
		var mb int64
		fmt.Sscan(s, &mb)
		size = mb << 20
	}
	archivePath := filepath.Join(b.TempDir(), "big.tar")
	const name = "localhost/bench-big:1"
	img := withLayer(testimage.Busybox(name, "true"), testimage.RandomLayer(size, time.Now().UnixNano()))
	if err := testimage.WriteFile(archivePath, testimage.Docker, img); err != nil {
		b.Fatal(err)
	}
	info, _ := os.Stat(archivePath)
	b.Logf("archive %s: %d MB", archivePath, info.Size()>>20)

	rounds := 3
	if b.N > rounds {
		rounds = b.N
	}
	times := map[string]map[string][]time.Duration{}
	for _, e := range []benchEngine{berth, podman} {
		times[e.name] = map[string][]time.Duration{}
		removeImage(b, e, name)
	}
	b.ResetTimer()
	for round := 0; round < rounds; round++ {
		order := []benchEngine{berth, podman}
		if round%2 == 1 {
			order = []benchEngine{podman, berth}
		}
		for _, e := range order {
			removeImage(b, e, name)
			times[e.name]["load"] = append(times[e.name]["load"], timeIt(b, func() error { return benchLoad(e, archivePath) }))

			reg := registrytest.Start(b, registrytest.Options{})
			ref := reg.Host + "/bench/" + e.name + ":1"
			times[e.name]["push"] = append(times[e.name]["push"], timeIt(b, func() error { return benchPush(e, name, ref) }))

			removeImage(b, e, name)
			removeImage(b, e, ref)
			times[e.name]["pull"] = append(times[e.name]["pull"], timeIt(b, func() error { return benchPull(e, ref) }))
			removeImage(b, e, ref)
			reg.Stop()
		}
	}
	b.StopTimer()
	for _, op := range []string{"load", "push", "pull"} {
		bm, pm := benchtest.Median(times["berth"][op]), benchtest.Median(times["podman"][op])
		ratio := bm.Seconds() / pm.Seconds()
		b.ReportMetric(bm.Seconds(), op+"-berth-s")
		b.ReportMetric(pm.Seconds(), op+"-podman-s")
		b.ReportMetric(ratio, op+"-ratio")
		fmt.Printf("transfer %s of %d MB: berth %s, podman %s, ratio %.2f (median of %d; berth %v podman %v)\n",
			op, size>>20, bm.Round(time.Millisecond), pm.Round(time.Millisecond), ratio, rounds, times["berth"][op], times["podman"][op])
	}
}

func timeIt(b *testing.B, f func() error) time.Duration {
	b.Helper()
	start := time.Now()
	if err := f(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

func benchLoad(e benchEngine, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	resp, err := http.Post(e.base+"/images/load", "application/x-tar", f)
	if err != nil {
		return err
	}
	return drain(e, "load", resp)
}

func benchPush(e benchEngine, name, ref string) error {
	resp, err := http.Post(e.base+"/images/"+url.PathEscape(name)+"/push?tlsVerify=false&destination="+url.QueryEscape(ref), "", nil)
	if err != nil {
		return err
	}
	return drain(e, "push", resp)
}

func benchPull(e benchEngine, ref string) error {
	resp, err := http.Post(e.base+"/images/pull?tlsVerify=false&quiet=true&reference="+url.QueryEscape(ref), "", nil)
	if err != nil {
		return err
	}
	return drain(e, "pull", resp)
}

// drain reads a whole answer and fails on an error status or error line.
func drain(e benchEngine, op string, resp *http.Response) error {
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || strings.Contains(string(body), `"error":`) {
		return fmt.Errorf("%s %s: %d %s", e.name, op, resp.StatusCode, body)
	}
	return nil
}

// removeImage removes an image and its layers from an engine, if present.
func removeImage(b *testing.B, e benchEngine, name string) {
	b.Helper()
	req, _ := http.NewRequest(http.MethodDelete, e.base+"/images/"+url.PathEscape(name)+"?force=true", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotFound {
		b.Fatalf("%s: remove %s: %d %s", e.name, name, resp.StatusCode, body)
	}
}
