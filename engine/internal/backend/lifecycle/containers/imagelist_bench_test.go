package containers_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/testimage"
)

// imageListUnderChurn measures GET /images/json from readers clients while
// churners clients create and remove containers, for d, and returns the
// listing's median and 99th percentile and how many container cycles ran.
func imageListUnderChurn(tb testing.TB, te *testEngine, readers, churners int, d time.Duration) (p50, p99 time.Duration, cycles int) {
	tb.Helper()
	transport := &http.Transport{MaxIdleConnsPerHost: readers + churners}
	client := &http.Client{Transport: transport, Timeout: time.Minute}
	defer transport.CloseIdleConnections()
	deadline := time.Now().Add(d)
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	for i := 0; i < churners; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				resp, err := client.Post(te.URL+"/containers/create", "application/json", strings.NewReader(`{"image":"busybox","command":["true"],"netns":{"nsmode":"none"}}`))
				if err != nil {
					return
				}
				var id struct{ ID string }
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated || jsonInto(body, &id) != nil {
					continue
				}
				req, _ := http.NewRequest(http.MethodDelete, te.URL+"/containers/"+id.ID+"?force=true", nil)
				if resp, err := client.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				mu.Lock()
				cycles++
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < readers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for time.Now().Before(deadline) {
				start := time.Now()
				resp, err := client.Get(te.URL + "/images/json")
				if err != nil {
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					mine = append(mine, time.Since(start))
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(lat) == 0 {
		tb.Fatal("no listing answered")
	}
	slices.Sort(lat)
	return lat[len(lat)/2], lat[len(lat)*99/100], cycles
}

// loadImages adds n more small images, so a listing has something to list.
func (te *testEngine) loadImages(n int) {
	te.T.Helper()
	var imgs []testimage.Image
	for i := 0; i < n; i++ {
		imgs = append(imgs, testimage.Busybox(fmt.Sprintf("localhost/list%d:latest", i), "true", fmt.Sprint(i)))
	}
	var buf bytes.Buffer
	if err := testimage.DockerArchive(&buf, imgs...); err != nil {
		te.T.Fatal(err)
	}
	te.Must(http.StatusOK, "POST", "/images/load", &buf)
}

// BenchmarkImageListUnderChurn: GET /images/json latency from 100 readers
// while 20 clients create and remove containers (and from 100 readers
// alone). Reported: p50 and p99 in milliseconds.
func BenchmarkImageListUnderChurn(b *testing.B) {
	te := startEngine(b)
	te.loadImages(20)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		q50, q99, _ := imageListUnderChurn(b, te, 100, 0, 3*time.Second)
		p50, p99, cycles := imageListUnderChurn(b, te, 100, 20, 5*time.Second)
		b.ReportMetric(float64(q99.Microseconds())/1000, "quiet-p99-ms")
		b.ReportMetric(float64(p50.Microseconds())/1000, "churn-p50-ms")
		b.ReportMetric(float64(p99.Microseconds())/1000, "churn-p99-ms")
		fmt.Printf("images/json, 100 readers: p50 %v p99 %v alone; p50 %v p99 %v while 20 clients created and removed %d containers\n", q50, q99, p50, p99, cycles)
	}
}

func jsonInto(data []byte, v any) error { return json.Unmarshal(data, v) }
