package imagesapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/testimage"
)

// engineProcess is berth-engine running as its own process, so it can be killed.
type engineProcess struct {
	t       *testing.T
	binary  string
	root    string
	url     string
	cmd     *exec.Cmd
	logPath string
}

// engineBinary is berth-engine built once for the tests that run it as a process.
var engineBinary struct {
	once sync.Once
	path string
	err  error
}

// buildEngine compiles berth-engine (once per test binary).
func buildEngine(t *testing.T) string {
	t.Helper()
	goTool := need(t, "go")
	engineBinary.once.Do(func() {
		dir, err := os.MkdirTemp("", "berth-engine-bin-")
		if err != nil {
			engineBinary.err = err
			return
		}
		engineBinary.path = filepath.Join(dir, "berth-engine")
		// The build tags containers/image and storage need, also when GOFLAGS lacks them.
		cmd := exec.Command(goTool, "build", "-tags", "containers_image_openpgp,exclude_graphdriver_btrfs,exclude_graphdriver_devicemapper",
			"-o", engineBinary.path, "github.com/berth-project/berth/engine/cmd/berth-engine")
		if out, err := cmd.CombinedOutput(); err != nil {
			engineBinary.err = fmt.Errorf("building berth-engine: %v\n%s", err, out)
		}
	})
	if engineBinary.err != nil {
		t.Fatal(engineBinary.err)
	}
	return engineBinary.path
}

// freePort finds a free loopback port.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// start runs the engine on root and waits for _ping.
func (p *engineProcess) start() {
	p.t.Helper()
	port := freePort(p.t)
	p.url = fmt.Sprintf("http://127.0.0.1:%d", port)
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	nets := enginetest.UniqueNetworks(p.t)
	p.cmd = exec.Command(p.binary, append([]string{"--listen", fmt.Sprintf("tcp://127.0.0.1:%d", port),
		"--root", filepath.Join(p.root, "root"), "--runroot", filepath.Join(p.root, "run"), "--log-level", "debug"},
		enginetest.NetworkFlags(nets)...)...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	logFile.Close()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(p.url + "/libpod/_ping"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	log, _ := os.ReadFile(p.logPath)
	p.t.Fatalf("engine did not answer _ping:\n%s", log)
}

// kill sends SIGKILL and reaps the process.
func (p *engineProcess) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_, _ = p.cmd.Process.Wait()
}

// stop ends the engine gracefully.
func (p *engineProcess) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _, _ = p.cmd.Process.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		p.kill()
	}
}

// TestKillDuringLoadLeavesConsistentStore kills the engine (SIGKILL) at
// several points of loading a large archive, restarts it on the same store,
// and checks that the store is consistent, the image list holds exactly the
// images loaded before, and the archive then loads completely.
func TestKillDuringLoadLeavesConsistentStore(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the engine binary")
	}
	dir := t.TempDir()
	// Runs before t.TempDir's removal: a kill can land in storage's
	// idmapped-mount probe and leave its mount behind.
	t.Cleanup(func() { enginetest.UnmountUnder(dir, 1) })
	p := &engineProcess{t: t, binary: buildEngine(t), root: dir, logPath: filepath.Join(dir, "engine.log")}

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

	p.start()
	defer p.stop()
	post(t, p.url+"/libpod/local/images/load?path="+url.QueryEscape(small), http.StatusOK)

	for _, delay := range []time.Duration{50 * time.Millisecond, 300 * time.Millisecond, 700 * time.Millisecond, 1200 * time.Millisecond} {
		// Load in the background and kill the engine while it works.
		done := make(chan struct{})
		go func() {
			defer close(done)
			resp, err := http.Post(p.url+"/libpod/local/images/load?path="+url.QueryEscape(big), "", nil)
			if err == nil {
				resp.Body.Close()
			}
		}()
		time.Sleep(delay)
		p.kill()
		<-done
		p.start()

		var report struct {
			Errors bool
			Images map[string][]string
			Layers map[string][]string
		}
		body := post(t, p.url+"/libpod/system/check", http.StatusOK)
		if err := json.Unmarshal(body, &report); err != nil {
			t.Fatal(err)
		}
		if report.Errors {
			t.Errorf("after kill at %v: store check found damage: %s", delay, body)
		}
		names := listNames(t, p.url)
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
			get(t, p.url+"/libpod/images/big:1/json", http.StatusOK)
			deleteReq(t, p.url+"/libpod/images/big:1", http.StatusOK)
		}
	}
	// The archive loads completely after all the kills.
	post(t, p.url+"/libpod/local/images/load?path="+url.QueryEscape(big), http.StatusOK)
	names := listNames(t, p.url)
	if !contains(names, "localhost/big:1") || !contains(names, "localhost/before:1") {
		t.Errorf("final images: %v", names)
	}
	body := post(t, p.url+"/libpod/system/check?quick=false", http.StatusOK)
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
	store := e.eng.Images().Storage()
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
	dir := t.TempDir()
	p := &engineProcess{t: t, binary: buildEngine(t), root: dir, logPath: filepath.Join(dir, "engine.log")}
	archive := filepath.Join(dir, "two.tar")
	if err := testimage.WriteFile(archive, testimage.Docker, busybox("localhost/keep:1"),
		testimage.Image{RepoTags: []string{"localhost/break:1"}, Layers: []testimage.Layer{{Files: []testimage.File{{Path: "x", Data: []byte("x")}}}}}); err != nil {
		t.Fatal(err)
	}
	p.start()
	post(t, p.url+"/libpod/local/images/load?path="+url.QueryEscape(archive), http.StatusOK)
	var inspect struct {
		ID string `json:"Id"`
	}
	if err := json.Unmarshal(get(t, p.url+"/libpod/images/break:1/json", http.StatusOK), &inspect); err != nil {
		t.Fatal(err)
	}
	p.kill()

	imageDir := filepath.Join(dir, "root", "storage", "overlay-images", inspect.ID)
	if _, err := os.Stat(imageDir); err != nil {
		imageDir = filepath.Join(dir, "root", "storage", "vfs-images", inspect.ID)
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

	p.start()
	defer p.stop()
	names := listNames(t, p.url)
	if strings.Join(names, ",") != "localhost/keep:1" {
		t.Errorf("images after a start on a damaged store: %v", names)
	}
	if body := post(t, p.url+"/libpod/system/check", http.StatusOK); !bytes.Contains(body, []byte(`"Errors":false`)) {
		t.Errorf("check after the start: %s", body)
	}
	log, _ := os.ReadFile(p.logPath)
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
