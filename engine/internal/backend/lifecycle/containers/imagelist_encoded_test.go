package containers_test

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the CPU time the process has used (user and system): on a
// machine other work loads, it varies far less than the wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkImageListOneClient: GET /images/json of 21 images from one
// client, one request at a time: the time per listing with nothing to
// wait for but the engine (and the client in the same process). Reported
// besides the wall time: the process's CPU time per listing (client and
// engine), which decides how many listings 2 cores serve.
func BenchmarkImageListOneClient(b *testing.B) {
	te := startEngine(b)
	te.loadImages(20)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	get := func() {
		resp, err := client.Get(te.URL + "/images/json")
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("images/json: %d", resp.StatusCode)
		}
	}
	get()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	for i := 0; i < b.N; i++ {
		get()
	}
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
}

// TestEncodedImageListFollowsChanges: the unfiltered listing, kept encoded
// while the stores are unchanged, shows at once a container created or
// removed (its image's Containers, once the storage is gone) and a tag
// added, and is sized.
func TestEncodedImageListFollowsChanges(t *testing.T) {
	te := startEngine(t)
	list := func() (containers int, names []string) {
		t.Helper()
		resp, err := http.Get(te.URL + "/images/json")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(body)) {
			t.Fatalf("images/json: %d, Content-Length %d for %d bytes", resp.StatusCode, resp.ContentLength, len(body))
		}
		var images []struct {
			Names      []string
			Containers int
		}
		if err := json.Unmarshal(body, &images); err != nil {
			t.Fatal(err)
		}
		for _, img := range images {
			containers += img.Containers
			names = append(names, img.Names...)
		}
		return containers, names
	}
	if n, _ := list(); n != 0 {
		t.Fatalf("%d containers before any was created", n)
	}
	id := te.create(map[string]any{"image": "busybox", "command": []string{"true"}, "netns": map[string]any{"nsmode": "none"}})
	if n, _ := list(); n != 1 {
		t.Fatalf("%d containers listed after one was created, want 1", n)
	}
	te.Must(http.StatusCreated, "POST", "/images/localhost/busybox:latest/tag?repo=localhost/follow&tag=1", nil)
	if _, names := list(); !slices.Contains(names, "localhost/follow:1") {
		t.Fatalf("the new tag is not listed: %v", names)
	}
	te.Must(http.StatusOK, "DELETE", "/containers/"+id+"?force=true", nil)
	// The removed container's storage goes in the background (remove.go):
	// the count follows once it is gone.
	deadline := time.Now().Add(5 * time.Second)
	for n, _ := list(); n != 0; n, _ = list() {
		if time.Now().After(deadline) {
			t.Fatalf("%d containers listed 5s after the only one was removed", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
