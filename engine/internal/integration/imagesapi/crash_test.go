package imagesapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
	"github.com/berth-project/berth/engine/testimage"
)

// startProcess starts berth-engine as its own process (so that it can be
// killed), without an image, logging at debug level. A crash test can run
// for minutes on a loaded machine: its deadline is longer than the default.
func startProcess(t *testing.T) *enginetest.Process {
	t.Helper()
	testdeadline.Set(t, 8*time.Minute)
	return enginetest.StartProcess(t, enginetest.Options{What: "image crash tests", Bridged: true, NoImage: true, Args: []string{"--log-level", "debug"}})
}

// TestKillDuringLoadLeavesConsistentStore kills the engine (SIGKILL) at
// several points of loading a large archive, restarts it on the same store,
// and checks that the store is consistent, the image list holds exactly the
// images loaded before, and the archive then loads completely.
func TestKillDuringLoadLeavesConsistentStore(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the engine binary")
	}
	// At cleanup nothing stays mounted below the engine's directory: a kill
	// can land in storage's idmapped-mount probe and leave its mount behind.
	p := startProcess(t)
	dir := p.Dir

	small := filepath.Join(dir, "small.tar")
	big := filepath.Join(dir, "big.tar")
	if err := testimage.WriteFile(small, testimage.Docker, busybox("localhost/before:1")); err != nil {
		t.Fatal(err)
	}
	if err := testimage.WriteFile(big, testimage.Docker, testimage.Image{
		RepoTags: []string{"localhost/big:1"},
		Layers:   []testimage.Layer{testimage.RandomLayer(48<<20, 1), testimage.RandomLayer(48<<20, 2)},
	}); err != nil {
		t.Fatal(err)
	}

	post(t, p.Base()+"/libpod/local/images/load?path="+url.QueryEscape(small), http.StatusOK)

	for _, delay := range []time.Duration{50 * time.Millisecond, 300 * time.Millisecond, 700 * time.Millisecond, 1200 * time.Millisecond} {
		// Load in the background and kill the engine while it works.
		done := make(chan struct{})
		go func() {
			defer close(done)
			resp, err := http.Post(p.Base()+"/libpod/local/images/load?path="+url.QueryEscape(big), "", nil)
			if err == nil {
				resp.Body.Close()
			}
		}()
		time.Sleep(delay)
		p.Kill9()
		<-done
		p.Start()

		var report struct {
			Errors bool
			Images map[string][]string
			Layers map[string][]string
		}
		body := post(t, p.Base()+"/libpod/system/check", http.StatusOK)
		if err := json.Unmarshal(body, &report); err != nil {
			t.Fatal(err)
		}
		if report.Errors {
			t.Errorf("after kill at %v: store check found damage: %s", delay, body)
		}
		names := listNames(t, p.Base())
		if !contains(names, "localhost/before:1") {
			t.Errorf("after kill at %v: the image loaded before is gone: %v", delay, names)
		}
		for _, n := range names {
			if n != "localhost/before:1" && n != "localhost/big:1" {
				t.Errorf("after kill at %v: unexpected image %s", delay, n)
			}
		}
		t.Logf("killed %v into the load: images afterwards %v", delay, names)
		if contains(names, "localhost/big:1") {
			// The load finished before the kill: the image must be whole.
			get(t, p.Base()+"/libpod/images/big:1/json", http.StatusOK)
			deleteReq(t, p.Base()+"/libpod/images/big:1", http.StatusOK)
		}
	}
	// The archive loads completely after all the kills.
	post(t, p.Base()+"/libpod/local/images/load?path="+url.QueryEscape(big), http.StatusOK)
	names := listNames(t, p.Base())
	if !contains(names, "localhost/big:1") || !contains(names, "localhost/before:1") {
		t.Errorf("final images: %v", names)
	}
	body := post(t, p.Base()+"/libpod/system/check?quick=false", http.StatusOK)
	if !bytes.Contains(body, []byte(`"Errors":false`)) {
		t.Errorf("final full check: %s", body)
	}
}

// TestSystemCheckRepairsDamage damages an image's stored configuration; the
// check reports it, and repair removes the image.
func TestSystemCheckRepairsDamage(t *testing.T) {
	e := startEngine(t)
	e.load(busybox("localhost/damaged:1"), testimage.Image{RepoTags: []string{"localhost/fine:1"}, Layers: []testimage.Layer{{Files: []testimage.File{{Path: "f", Data: []byte("f")}}}}})
	var clean struct{ Errors bool }
	e.do(http.MethodPost, "/libpod/system/check", nil).expect(t, http.StatusOK).json(t, &clean)
	if clean.Errors {
		t.Fatal("a fresh store has errors")
	}
	store := e.Eng.Images().Storage()
	img, err := store.Image("localhost/damaged:1")
	if err != nil {
		t.Fatal(err)
	}
	// Big data items (manifest, configuration) sit beside the image's userdata directory.
	dir := filepath.Join(store.GraphRoot(), store.GraphDriverName()+"-images", img.ID)
	entries, _ := os.ReadDir(dir)
	damaged := 0
	for _, entry := range entries {
		if strings.HasPrefix(entry.Name(), "=") { // big data items are stored base64-named with a leading '='
			if err := os.Truncate(filepath.Join(dir, entry.Name()), 1); err != nil {
				t.Fatal(err)
			}
			damaged++
		}
	}
	if damaged == 0 {
		t.Fatalf("no big data files found in %s: %v", dir, entries)
	}
	var report struct {
		Errors        bool
		Images        map[string][]string
		RemovedImages map[string][]string
	}
	e.do(http.MethodPost, "/libpod/system/check?quick=true", nil).expect(t, http.StatusOK).json(t, &report)
	if !report.Errors || len(report.Images[img.ID]) == 0 || len(report.RemovedImages) != 0 {
		t.Fatalf("check of a damaged image: %+v", report)
	}
	e.do(http.MethodPost, "/libpod/system/check?quick=true&repair=true", nil).expect(t, http.StatusOK).json(t, &report)
	if names, ok := report.RemovedImages[img.ID]; !ok || !contains(names, "localhost/damaged:1") {
		t.Fatalf("repair: %+v", report)
	}
	names := tagsOf(e.list(""))
	if strings.Join(names, ",") != "localhost/fine:1" {
		t.Errorf("images after repair: %v", names)
	}
	e.do(http.MethodPost, "/libpod/system/check?unreferenced_layer_max_age=soon", nil).engineError(t, http.StatusBadRequest)
}

// TestStartupRepairsDamage: damage left while the engine was down is found
// and removed when it starts, before the first request.
func TestStartupRepairsDamage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the engine binary")
	}
	p := startProcess(t)
	archive := filepath.Join(p.Dir, "two.tar")
	if err := testimage.WriteFile(archive, testimage.Docker, busybox("localhost/keep:1"),
		testimage.Image{RepoTags: []string{"localhost/break:1"}, Layers: []testimage.Layer{{Files: []testimage.File{{Path: "x", Data: []byte("x")}}}}}); err != nil {
		t.Fatal(err)
	}
	post(t, p.Base()+"/libpod/local/images/load?path="+url.QueryEscape(archive), http.StatusOK)
	var inspect struct {
		ID string `json:"Id"`
	}
	if err := json.Unmarshal(get(t, p.Base()+"/libpod/images/break:1/json", http.StatusOK), &inspect); err != nil {
		t.Fatal(err)
	}
	p.Kill9()

	imageDir := filepath.Join(p.Root, "storage", "overlay-images", inspect.ID)
	if _, err := os.Stat(imageDir); err != nil {
		imageDir = filepath.Join(p.Root, "storage", "vfs-images", inspect.ID)
	}
	entries, err := os.ReadDir(imageDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, entry := range entries {
		if strings.HasPrefix(entry.Name(), "=") {
			if err := os.Truncate(filepath.Join(imageDir, entry.Name()), 0); err != nil {
				t.Fatal(err)
			}
		}
	}

	p.Start()
	names := listNames(t, p.Base())
	if strings.Join(names, ",") != "localhost/keep:1" {
		t.Errorf("images after a start on a damaged store: %v", names)
	}
	if body := post(t, p.Base()+"/libpod/system/check", http.StatusOK); !bytes.Contains(body, []byte(`"Errors":false`)) {
		t.Errorf("check after the start: %s", body)
	}
	log, _ := os.ReadFile(p.LogPath)
	if !bytes.Contains(log, []byte("repaired")) {
		t.Errorf("the engine did not log the repair:\n%s", log)
	}
}

func post(t *testing.T, u string, want int) []byte {
	t.Helper()
	return request(t, http.MethodPost, u, want)
}

func get(t *testing.T, u string, want int) []byte {
	t.Helper()
	return request(t, http.MethodGet, u, want)
}

func deleteReq(t *testing.T, u string, want int) []byte {
	t.Helper()
	return request(t, http.MethodDelete, u, want)
}

func request(t *testing.T, method, u string, want int) []byte {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, u, resp.StatusCode, want, body)
	}
	return body
}

func listNames(t *testing.T, base string) []string {
	t.Helper()
	var list []summary
	if err := json.Unmarshal(get(t, base+"/libpod/images/json?all=true", http.StatusOK), &list); err != nil {
		t.Fatal(err)
	}
	return tagsOf(list)
}
