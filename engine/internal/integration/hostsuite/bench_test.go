package hostsuite

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
)

// TestBenchVsPodman (BERTH_HOSTLAB_BENCH=1; hack/hostlab.sh bench runs it
// in the VM) compares the engine with Podman 4.3.1 on the same host in the
// same run, with the same image and --network none on both:
//   - the create+start+wait+rm cycle of a container running true: over the
//     API (the engine vs podman system service, same HTTP client), and
//     with podman's CLI (podman run --rm, a local engine, vs podman
//     --remote run --rm against the engine); medians, the two interleaved;
//   - stats of 50 running containers: sequential GET
//     /libpod/containers/stats?stream=false (all of them) against each,
//     requests per second over a fixed time.
//
// It logs BENCH lines and fails when a target of issue 20 is missed: the
// API cycle at most 0.25x Podman's, stats at least 10x Podman's throughput.
func TestBenchVsPodman(t *testing.T) {
	if os.Getenv("BERTH_HOSTLAB_BENCH") != "1" {
		t.Skip("a benchmark: BERTH_HOSTLAB_BENCH=1 (hack/hostlab.sh bench)")
	}
	requirePodman(t)
	// Podman under qemu's emulation is slow: the bench gets more time
	// than a test (hack/hostlab.sh bench gives the VM 25 minutes).
	testdeadline.Set(t, 22*time.Minute)
	p := startEngineProcess(t)
	berth := &apiTarget{name: "berth", base: p.url, client: &http.Client{}}

	// Podman: the same image, its own API service on a unix socket.
	dir := t.TempDir()
	archive := filepath.Join(dir, "busybox.tar")
	if err := os.WriteFile(archive, busyboxArchive(t).Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	podmanCLI(t, "load", "-i", archive)
	sock := filepath.Join(dir, "podman.sock")
	svc := exec.Command("podman", "system", "service", "--time=0", "unix://"+sock)
	svc.Stderr = os.Stderr
	if err := svc.Start(); err != nil {
		t.Fatal(err)
	}
	podman := &apiTarget{name: "podman", base: "http://podman/v4.3.1/libpod", client: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}}
	t.Cleanup(func() {
		podman.removeAll(t)
		svc.Process.Kill()
		svc.Wait()
		podmanCLI(t, "rm", "-af")
	})
	eventually(t, time.Minute, "podman system service answering", func() bool {
		resp, err := podman.client.Get("http://podman/_ping")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})

	// The cycle over the API, interleaved; one warm-up each.
	const cycles = 10
	var apiB, apiP []time.Duration
	for i := 0; i <= cycles; i++ {
		b, q := berth.cycle(t), podman.cycle(t)
		t.Logf("cycle %d: berth %v, podman %v", i, b.Round(time.Millisecond), q.Round(time.Millisecond))
		if i > 0 {
			apiB, apiP = append(apiB, b), append(apiP, q)
		}
	}
	// The cycle with podman's CLI: local engine vs remote to Berth.
	url := "tcp://" + p.addr
	const cliCycles = 5
	var cliB, cliP []time.Duration
	for i := 0; i <= cliCycles; i++ {
		b := timed(func() {
			podmanCLI(t, "--remote", "--url", url, "run", "--rm", "--network", "none", "localhost/busybox:latest", "true")
		})
		q := timed(func() { podmanCLI(t, "run", "--rm", "--network", "none", "localhost/busybox:latest", "true") })
		t.Logf("CLI cycle %d: podman --remote to berth %v, podman %v", i, b.Round(time.Millisecond), q.Round(time.Millisecond))
		if i > 0 {
			cliB, cliP = append(cliB, b), append(cliP, q)
		}
	}

	// Stats of 50 running containers.
	const running = 50
	statsRate := map[string]float64{}
	for _, e := range []*apiTarget{berth, podman} {
		start := time.Now()
		e.startSleepers(t, running)
		t.Logf("BENCH %s: started %d containers in %v", e.name, running, time.Since(start).Round(time.Millisecond))
		n, d := e.statsLoop(t, running, 10*time.Second)
		statsRate[e.name] = float64(n) / d.Seconds()
		t.Logf("BENCH %s: stats of %d containers: %d requests in %v = %.2f/s (%.0f ms each)",
			e.name, running, n, d.Round(time.Millisecond), statsRate[e.name], d.Seconds()*1000/float64(n))
		e.removeAll(t)
	}

	mb, mp := median(apiB), median(apiP)
	cb, cp := median(cliB), median(cliP)
	t.Logf("BENCH cycle API (create+start+wait+rm, median of %d): berth %v, podman %v: %.2fx", cycles, mb, mp, mb.Seconds()/mp.Seconds())
	t.Logf("BENCH cycle CLI (run --rm, median of %d): podman --remote to berth %v, podman (local) %v: %.2fx", cliCycles, cb, cp, cb.Seconds()/cp.Seconds())
	t.Logf("BENCH stats of %d: berth %.2f/s, podman %.2f/s: %.1fx", running, statsRate["berth"], statsRate["podman"], statsRate["berth"]/statsRate["podman"])
	if r := mb.Seconds() / mp.Seconds(); r > 0.25 {
		t.Errorf("the API cycle takes %.2fx Podman's time (target at most 0.25x)", r)
	}
	if r := statsRate["berth"] / statsRate["podman"]; r < 10 {
		t.Errorf("stats throughput is %.1fx Podman's (target at least 10x)", r)
	}
}

// podmanCLI runs podman (local unless args say --remote) and fails t on
// an error.
func podmanCLI(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "podman", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func timed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2].Round(time.Millisecond)
}

// apiTarget is an engine's libpod API (Berth's or Podman's service).
type apiTarget struct {
	name   string
	base   string
	client *http.Client
}

func (a *apiTarget) do(t testing.TB, method, path string, body any) (int, []byte) {
	t.Helper()
	return enginetest.Do(t, a.client, method, a.base, path, body)
}

func (a *apiTarget) must(t testing.TB, want int, method, path string, body any) []byte {
	t.Helper()
	return enginetest.Must(t, func(m, p string, b any) (int, []byte) { return a.do(t, m, p, b) }, want, method, path, body)
}

func (a *apiTarget) create(t testing.TB, cmd ...string) string {
	t.Helper()
	var out struct {
		ID string `json:"Id"`
	}
	body := a.must(t, http.StatusCreated, "POST", "/containers/create", map[string]any{
		"image": "localhost/busybox:latest", "command": cmd, "netns": map[string]any{"nsmode": "none"}})
	if err := json.Unmarshal(body, &out); err != nil || out.ID == "" {
		t.Fatalf("%s create: %v %s", a.name, err, body)
	}
	return out.ID
}

// cycle times create, start, wait and remove of a container running true.
func (a *apiTarget) cycle(t testing.TB) time.Duration {
	t.Helper()
	start := time.Now()
	id := a.create(t, "true")
	a.must(t, http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	if code := strings.TrimSpace(string(a.must(t, http.StatusOK, "POST", "/containers/"+id+"/wait", nil))); code != "0" {
		t.Fatalf("%s wait: exit code %s", a.name, code)
	}
	a.must(t, http.StatusOK, "DELETE", "/containers/"+id, nil)
	return time.Since(start)
}

// startSleepers starts n containers running sleep, four at a time.
func (a *apiTarget) startSleepers(t testing.TB, n int) {
	t.Helper()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			id := a.create(t, "sleep", "900")
			a.must(t, http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
		}()
	}
	wg.Wait()
}

// statsLoop asks for the stats of every running container, one request
// after another, for about d; every answer must hold n containers.
func (a *apiTarget) statsLoop(t testing.TB, n int, d time.Duration) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	count := 0
	for count < 3 || time.Since(start) < d {
		var out struct {
			Stats []json.RawMessage
		}
		body := a.must(t, http.StatusOK, "GET", "/containers/stats?stream=false", nil)
		if err := json.Unmarshal(body, &out); err != nil || len(out.Stats) != n {
			t.Fatalf("%s stats: %d entries, want %d: %v %.300s", a.name, len(out.Stats), n, err, body)
		}
		count++
	}
	return count, time.Since(start)
}

func (a *apiTarget) removeAll(t testing.TB) {
	t.Helper()
	enginetest.RemoveAll(func(m, p string, b any) (int, []byte) { return a.do(t, m, p, b) })
}
