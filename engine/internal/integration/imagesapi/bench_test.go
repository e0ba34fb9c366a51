package imagesapi

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/benchtest"
	"github.com/berth-project/berth/engine/testimage"
)

// benchImages are the 50 images both engines list: one shared base layer,
// distinct configurations (so distinct IDs), one tag each.
func benchImages() []testimage.Image {
	images := make([]testimage.Image, 0, 50)
	for i := 0; i < 50; i++ {
		images = append(images, testimage.Image{
			RepoTags: []string{fmt.Sprintf("localhost/bench-%02d:1", i)},
			Created:  testimage.DefaultCreated.Add(time.Duration(i) * time.Minute),
			Config:   testimage.Config{Cmd: []string{"sh"}, Labels: map[string]string{"bench": "list", "n": fmt.Sprint(i)}},
			Layers:   []testimage.Layer{{Files: []testimage.File{{Path: "n", Data: []byte(fmt.Sprint(i))}}}},
		})
	}
	return images
}

// loadInto loads archive through baseURL's ImagesLoad.
func loadInto(b *testing.B, client *http.Client, baseURL string, archive []byte) {
	b.Helper()
	resp, err := client.Post(baseURL+"/v4.3.1/libpod/images/load", "application/x-tar", bytes.NewReader(archive))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("load into %s: %d %s", baseURL, resp.StatusCode, body)
	}
}

// listOnce lists images and checks that all 50 came back.
func listOnce(b *testing.B, client *http.Client, baseURL string) {
	resp, err := client.Get(baseURL + "/v4.3.1/libpod/images/json")
	if err != nil {
		b.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("list %s: %d %v", baseURL, resp.StatusCode, err)
	}
	if n := bytes.Count(body, []byte(`"localhost/bench-`)); n < 50 {
		b.Fatalf("list %s returned %d bench names", baseURL, n)
	}
}

// BenchmarkImageListVsPodman measures GET {prefix}/images/json with 50 images
// on berth-engine and on Podman 4.3.1 (BERTH_BENCH_PODMAN_URL, started by
// hack/bench.sh) in the same run, alternating requests so both see the same
// machine load, and reports both latencies and the throughput ratio.
func BenchmarkImageListVsPodman(b *testing.B) {
	podmanURL := benchtest.PodmanURL(b)
	podmanHTTP := "http://" + strings.TrimPrefix(podmanURL, "tcp://")

	e := startEngine(b)
	var archive bytes.Buffer
	if err := testimage.DockerArchive(&archive, benchImages()...); err != nil {
		b.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}, Timeout: 60 * time.Second}
	loadInto(b, client, e.Base(), archive.Bytes())
	loadInto(b, client, podmanHTTP, archive.Bytes())
	// Warm both (caches, connections).
	for i := 0; i < 3; i++ {
		listOnce(b, client, e.Base())
		listOnce(b, client, podmanHTTP)
	}

	berthPer, podmanPer := benchtest.Throughput(b, "list",
		func() { listOnce(b, client, e.Base()) }, func() { listOnce(b, client, podmanHTTP) })
	b.Logf("images/json with 50 images: berth %.2f ms, podman %.2f ms per list; berth throughput = %.1fx Podman's (target >= 10x)",
		berthPer/1e6, podmanPer/1e6, podmanPer/berthPer)
}

// BenchmarkImageList measures GET {prefix}/images/json with 50 images on
// berth-engine alone, with parallel clients (no reference peer needed).
func BenchmarkImageList(b *testing.B) {
	e := startEngine(b)
	var archive bytes.Buffer
	if err := testimage.DockerArchive(&archive, benchImages()...); err != nil {
		b.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: 60 * time.Second}
	loadInto(b, client, e.Base(), archive.Bytes())
	listOnce(b, client, e.Base())
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			listOnce(b, client, e.Base())
		}
	})
}
