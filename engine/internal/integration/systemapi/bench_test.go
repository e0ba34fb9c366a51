package systemapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/benchtest"
	"github.com/berth-project/berth/engine/testimage"
)

// dfFixture is what both engines hold for the disk usage benchmark.
const (
	dfImages     = 50
	dfContainers = 100
	dfVolumes    = 20
)

// dfImageSet is 50 images on one shared busybox layer, one small layer each.
func dfImageSet() []testimage.Image {
	images := make([]testimage.Image, 0, dfImages)
	for i := 0; i < dfImages; i++ {
		images = append(images, testimage.Image{
			RepoTags: []string{fmt.Sprintf("localhost/df-bench-%02d:1", i)},
			Config:   testimage.Config{Cmd: []string{"sh"}, Labels: map[string]string{"n": fmt.Sprint(i)}},
			Layers:   []testimage.Layer{{Files: []testimage.File{{Path: "n", Data: []byte(fmt.Sprint(i))}}}},
		})
	}
	return images
}

// benchCall sends one request to base and fails b unless the status is want.
func benchCall(b *testing.B, client *http.Client, method, url string, body any, want int) []byte {
	b.Helper()
	var r io.Reader
	switch v := body.(type) {
	case nil:
	case []byte:
		r = bytes.NewReader(v)
	default:
		data, _ := json.Marshal(v)
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		b.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		b.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, data)
	}
	return data
}

// fillForDf loads the images, creates the volumes (a 1 KiB file in each)
// and the containers (the first 20 each mount a volume) through base's API.
func fillForDf(b *testing.B, client *http.Client, base string, archive []byte) {
	b.Helper()
	benchCall(b, client, "POST", base+"/images/load", archive, http.StatusOK)
	for i := 0; i < dfVolumes; i++ {
		var v struct{ Mountpoint string }
		if err := json.Unmarshal(benchCall(b, client, "POST", base+"/volumes/create", map[string]any{"Name": fmt.Sprintf("df-bench-%02d", i)}, http.StatusCreated), &v); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(v.Mountpoint, "data"), bytes.Repeat([]byte("v"), 1024), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < dfContainers; i++ {
		spec := map[string]any{
			"image":   fmt.Sprintf("localhost/df-bench-%02d:1", i%dfImages),
			"name":    fmt.Sprintf("df-bench-%03d", i),
			"command": []string{"true"},
			"netns":   map[string]any{"nsmode": "none"},
		}
		if i < dfVolumes {
			spec["volumes"] = []map[string]any{{"Name": fmt.Sprintf("df-bench-%02d", i), "Dest": "/data"}}
		}
		benchCall(b, client, "POST", base+"/containers/create", spec, http.StatusCreated)
	}
}

// dfOnce asks base for its disk usage and checks that all of it is there.
func dfOnce(b *testing.B, client *http.Client, base string) {
	var report struct {
		Images     []json.RawMessage
		Containers []json.RawMessage
		Volumes    []json.RawMessage
	}
	if err := json.Unmarshal(benchCall(b, client, "GET", base+"/system/df", nil, http.StatusOK), &report); err != nil {
		b.Fatal(err)
	}
	if len(report.Images) < dfImages || len(report.Containers) < dfContainers || len(report.Volumes) < dfVolumes {
		b.Fatalf("%s df: %d images, %d containers, %d volumes", base, len(report.Images), len(report.Containers), len(report.Volumes))
	}
}

// BenchmarkSystemDfVsPodman measures GET {prefix}/system/df with 50 images,
// 100 containers and 20 volumes on berth-engine and on Podman 4.3.1
// (BERTH_BENCH_PODMAN_URL, started by hack/bench.sh) in the same run,
// alternating requests, and reports both latencies and the throughput ratio
// (target: berth at least 10x Podman's throughput).
func BenchmarkSystemDfVsPodman(b *testing.B) {
	podmanURL := benchtest.PodmanURL(b)
	podman := "http://" + strings.TrimPrefix(podmanURL, "tcp://") + "/v4.3.1/libpod"
	te := startEngine(b)
	berth := te.Base() + "/v4.3.1/libpod"

	var archive bytes.Buffer
	if err := testimage.DockerArchive(&archive, dfImageSet()...); err != nil {
		b.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}, Timeout: 5 * time.Minute}
	fillForDf(b, client, berth, archive.Bytes())
	fillForDf(b, client, podman, archive.Bytes())
	// The benchmark function runs more than once: Podman's store is emptied
	// of what it added each time.
	b.Cleanup(func() {
		for _, kind := range []struct {
			path  string
			count int
		}{{"/containers/df-bench-%03d?force=true", dfContainers}, {"/volumes/df-bench-%02d?force=true", dfVolumes}} {
			for i := 0; i < kind.count; i++ {
				req, _ := http.NewRequest("DELETE", podman+fmt.Sprintf(kind.path, i), nil)
				if resp, err := client.Do(req); err == nil {
					resp.Body.Close()
				}
			}
		}
	})
	for i := 0; i < 2; i++ {
		dfOnce(b, client, berth)
		dfOnce(b, client, podman)
	}

	berthPer, podmanPer := benchtest.Throughput(b, "df",
		func() { dfOnce(b, client, berth) }, func() { dfOnce(b, client, podman) })
	b.Logf("system/df with %d images, %d containers, %d volumes: berth %.2f ms, podman %.2f ms; berth throughput = %.1fx Podman's (target >= 10x)",
		dfImages, dfContainers, dfVolumes, berthPer/1e6, podmanPer/1e6, podmanPer/berthPer)
}

// BenchmarkSystemDf measures GET {prefix}/system/df on berth-engine alone
// with 50 images, 100 containers and 20 volumes (no reference peer needed).
func BenchmarkSystemDf(b *testing.B) {
	te := startEngine(b)
	berth := te.Base() + "/v4.3.1/libpod"
	var archive bytes.Buffer
	if err := testimage.DockerArchive(&archive, dfImageSet()...); err != nil {
		b.Fatal(err)
	}
	client := &http.Client{Timeout: time.Minute}
	fillForDf(b, client, berth, archive.Bytes())
	dfOnce(b, client, berth)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dfOnce(b, client, berth)
	}
}
