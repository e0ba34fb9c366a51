package hostsuite

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/benchtest"
	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/poll"
	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
	"github.com/berth-project/berth/engine/testimage"
)

// TestBenchVsPodman (BERTH_HOSTLAB_BENCH=1; hack/hostlab.sh bench runs it
// in the VM) compares the engine with Podman 4.3.1 on the same host in the
// same run, with the same image and --network none on both:
//   - the create+start+wait+rm cycle of a container running true: over the
//     API (the engine vs podman system service, same HTTP client), and
//     with podman's CLI (podman run --rm, a local engine, vs podman
//     --remote run --rm against the engine); medians, the two interleaved;
//   - stats of 50 running containers in each (both sets running): GET
//     /libpod/containers/stats?stream=false (all of them), requests to the
//     two alternating for 40 s; throughput is 1 / the median request.
//
// It logs BENCH lines and fails when a target of issue 20 is missed: the
// API cycle at most 0.25x Podman's, stats at least 10x Podman's throughput.
func TestBenchVsPodman(t *testing.T) {
	if os.Getenv("BERTH_HOSTLAB_BENCH") != "1" {
		t.Skip("a benchmark: BERTH_HOSTLAB_BENCH=1 (hack/hostlab.sh bench)")
	}
	enginetest.RequirePodman(t)
	// Podman under qemu's emulation is slow: the bench gets more time
	// than a test (hack/hostlab.sh bench gives the VM 25 minutes).
	testdeadline.Set(t, 22*time.Minute)
	p := startEngineProcess(t)
	berth := &apiTarget{"berth", p.Engine}

	// Podman: the same image, its own API service on a unix socket.
	dir := t.TempDir()
	archive := filepath.Join(dir, "busybox.tar")
	var img bytes.Buffer
	if err := testimage.DockerArchive(&img, labImage()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(archive, img.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	podmanCLI(t, "load", "-i", archive)
	sock := filepath.Join(dir, "podman.sock")
	svc := exec.Command("podman", "system", "service", "--time=0", "unix://"+sock)
	svc.Stderr = os.Stderr
	if err := svc.Start(); err != nil {
		t.Fatal(err)
	}
	podman := &apiTarget{"podman", &enginetest.Engine{T: t, URL: "http://podman/v4.3.1/libpod", Client: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}}}
	t.Cleanup(func() {
		enginetest.RemoveAll(podman.Do)
		svc.Process.Kill()
		svc.Wait()
		podmanCLI(t, "rm", "-af")
	})
	poll.Until(t, time.Minute, "podman system service answering", func() bool {
		resp, err := podman.Client.Get("http://podman/_ping")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})

	// The cycle over the API, interleaved; one warm-up each.
	const cycles = 10
	var apiB, apiP []time.Duration
	phasesB, phasesP := map[string][]time.Duration{}, map[string][]time.Duration{}
	for i := 0; i <= cycles; i++ {
		b, q := berth.cycle(phasesB), podman.cycle(phasesP)
		t.Logf("cycle %d: berth %v, podman %v", i, b.Round(time.Millisecond), q.Round(time.Millisecond))
		if i > 0 {
			apiB, apiP = append(apiB, b), append(apiP, q)
		}
	}
	// Where the time goes: each call's median, and what starting a Go
	// binary (runc) and conmon costs here.
	for _, ph := range []string{"create", "start", "wait", "rm"} {
		t.Logf("BENCH cycle phase %s (median): berth %v, podman %v", ph, median(phasesB[ph]), median(phasesP[ph]))
	}
	for _, bin := range []string{"runc", "conmon"} {
		var d []time.Duration
		for i := 0; i < 5; i++ {
			d = append(d, benchtest.Timed(func() { exec.Command(bin, "--version").Run() }))
		}
		t.Logf("BENCH %s --version (median of 5): %v", bin, median(d))
	}
	// The cycle with podman's CLI: local engine vs remote to Berth.
	url := "tcp://" + p.Addr
	const cliCycles = 5
	var cliB, cliP []time.Duration
	for i := 0; i <= cliCycles; i++ {
		b := benchtest.Timed(func() {
			podmanCLI(t, "--remote", "--url", url, "run", "--rm", "--network", "none", "localhost/busybox:latest", "true")
		})
		q := benchtest.Timed(func() { podmanCLI(t, "run", "--rm", "--network", "none", "localhost/busybox:latest", "true") })
		t.Logf("CLI cycle %d: podman --remote to berth %v, podman %v", i, b.Round(time.Millisecond), q.Round(time.Millisecond))
		if i > 0 {
			cliB, cliP = append(cliB, b), append(cliP, q)
		}
	}

	// Stats of 50 running containers in each engine, both sets running
	// at once; requests to the two alternate, so that the host's load
	// (qemu's emulation shares this machine) weighs on both alike.
	const running = 50
	for _, e := range []*apiTarget{berth, podman} {
		start := time.Now()
		e.startSleepers(running)
		t.Logf("BENCH %s: started %d containers in %v", e.name, running, time.Since(start).Round(time.Millisecond))
	}
	if unified() {
		readCost(t, &lab{p.Engine})
	}
	var statsB, statsP []time.Duration
	for deadline := time.Now().Add(40 * time.Second); len(statsB) < 5 || time.Now().Before(deadline); {
		statsB = append(statsB, benchtest.Timed(func() { berth.stats(running) }))
		statsP = append(statsP, benchtest.Timed(func() { podman.stats(running) }))
	}
	// Each engine alone, requests back to back: what the other's request
	// leaves running (Podman's Go heap, the kernel's counters) weighs on
	// the alternating figures.
	for _, e := range []*apiTarget{berth, podman} {
		var alone []time.Duration
		for i := 0; i < 7; i++ {
			alone = append(alone, benchtest.Timed(func() { e.stats(running) }))
		}
		t.Logf("BENCH stats of %d containers, %s alone, 7 requests back to back: median %v", running, e.name, median(alone))
	}
	statsRate := map[string]float64{"berth": 1 / median(statsB).Seconds(), "podman": 1 / median(statsP).Seconds()}
	t.Logf("BENCH stats of %d containers, %d requests each, alternating: berth median %v, podman median %v",
		running, len(statsB), median(statsB), median(statsP))

	mb, mp := median(apiB), median(apiP)
	cb, cp := median(cliB), median(cliP)
	t.Logf("BENCH cycle API (create+start+wait+rm, median of %d): berth %v, podman %v: %.2fx", cycles, mb, mp, mb.Seconds()/mp.Seconds())
	t.Logf("BENCH cycle CLI (run --rm, median of %d): podman --remote to berth %v, podman (local) %v: %.2fx", cliCycles, cb, cp, cb.Seconds()/cp.Seconds())
	t.Logf("BENCH stats of %d (1 / median request time): berth %.2f/s, podman %.2f/s: %.1fx", running, statsRate["berth"], statsRate["podman"], statsRate["berth"]/statsRate["podman"])
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

// median is benchtest.Median to the millisecond, as the BENCH lines print it.
func median(d []time.Duration) time.Duration { return benchtest.Median(d).Round(time.Millisecond) }

// apiTarget is an engine's libpod API (Berth's or Podman's service).
type apiTarget struct {
	name string
	*enginetest.Engine
}

// create creates a container running cmd with no network.
func (a *apiTarget) create(cmd ...string) string {
	a.T.Helper()
	return a.Create(map[string]any{"command": cmd, "netns": map[string]any{"nsmode": "none"}})
}

// cycle times create, start, wait and remove of a container running
// true; each call's time is added to phases.
func (a *apiTarget) cycle(phases map[string][]time.Duration) time.Duration {
	a.T.Helper()
	start := time.Now()
	last := start
	phase := func(name string) {
		now := time.Now()
		phases[name] = append(phases[name], now.Sub(last))
		last = now
	}
	id := a.create("true")
	phase("create")
	a.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	phase("start")
	if code := a.Wait(id); code != 0 {
		a.T.Fatalf("%s wait: exit code %d", a.name, code)
	}
	phase("wait")
	a.Must(http.StatusOK, "DELETE", "/containers/"+id, nil)
	phase("rm")
	return time.Since(start)
}

// startSleepers starts n containers running sleep, four at a time.
func (a *apiTarget) startSleepers(n int) {
	a.T.Helper()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			id := a.create("sleep", "900")
			a.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
		}()
	}
	wg.Wait()
}

// stats asks for the stats of every running container; the answer must
// hold n containers.
func (a *apiTarget) stats(n int) {
	a.T.Helper()
	var out struct {
		Stats []json.RawMessage
	}
	body := a.Must(http.StatusOK, "GET", "/containers/stats?stream=false", nil)
	if err := json.Unmarshal(body, &out); err != nil || len(out.Stats) != n {
		a.T.Fatalf("%s stats: %d entries, want %d: %v %.300s", a.name, len(out.Stats), n, err, body)
	}
}

// readCost logs what reading each file the stats of a running container
// need costs here for all of them (five rounds, median), the kernel's
// and the file API's share of a stats request.
func readCost(t *testing.T, l *lab) {
	t.Helper()
	var list []struct {
		ID string `json:"Id"`
	}
	l.Get("/containers/json", &list)
	var dirs, pids []string
	for _, c := range list {
		d := l.inspect(c.ID)
		dirs = append(dirs, filepath.Join("/sys/fs/cgroup", d.State.CgroupPath))
		pids = append(pids, strconv.Itoa(d.State.Pid))
	}
	var total time.Duration
	for _, f := range []string{"cpu.stat", "memory.current", "memory.stat", "memory.peak", "memory.max", "pids.current", "io.stat", "net/dev"} {
		var rounds []time.Duration
		for r := 0; r < 5; r++ {
			rounds = append(rounds, benchtest.Timed(func() {
				for i := range dirs {
					path := filepath.Join(dirs[i], f)
					if f == "net/dev" {
						path = "/proc/" + pids[i] + "/net/dev"
					}
					os.ReadFile(path)
				}
			}))
		}
		total += median(rounds)
		t.Logf("BENCH reading %s of %d containers: %v", f, len(dirs), median(rounds))
	}
	t.Logf("BENCH reading every stats file of %d containers: %v", len(dirs), total)
	// The same files through descriptors opened once, read again from
	// offset 0 (what an engine that keeps them open pays per sample).
	var held []*os.File
	for i := range dirs {
		for _, f := range []string{"cpu.stat", "memory.current", "memory.stat", "memory.peak", "memory.max", "pids.current", "io.stat"} {
			if fd, err := os.Open(filepath.Join(dirs[i], f)); err == nil {
				held = append(held, fd)
			}
		}
	}
	defer func() {
		for _, fd := range held {
			fd.Close()
		}
	}()
	buf := make([]byte, 8192)
	var rounds []time.Duration
	for r := 0; r < 5; r++ {
		rounds = append(rounds, benchtest.Timed(func() {
			for _, fd := range held {
				fd.ReadAt(buf, 0)
			}
		}))
	}
	t.Logf("BENCH reading the cgroup files of %d containers through %d descriptors held open: %v", len(dirs), len(held), median(rounds))
}

// TestProfileStats (hack/hostlab.sh bench with BERTH_HOSTLAB_PROFILE=FILE)
// writes a CPU profile of an in-process engine answering stats of 50
// running containers, 100 requests back to back: where the engine's time
// goes in the VM, where the kernel's share is known (readCost). The
// profile covers this process, client side included.
func TestProfileStats(t *testing.T) {
	out := os.Getenv("BERTH_HOSTLAB_PROFILE")
	if out == "" {
		t.Skip("a profile: BERTH_HOSTLAB_PROFILE=FILE (hack/hostlab.sh bench)")
	}
	testdeadline.Set(t, 14*time.Minute)
	const running = 50
	// The same request to the berth-engine binary (as TestBenchVsPodman
	// runs it), for comparison; its containers go before the profile.
	t.Run("binary", func(t *testing.T) {
		b := &apiTarget{"berth", startEngineProcess(t).Engine}
		b.startSleepers(running)
		b.stats(running)
		var times []time.Duration
		for i := 0; i < 30; i++ {
			times = append(times, benchtest.Timed(func() { b.stats(running) }))
		}
		t.Logf("BENCH stats of %d containers, berth-engine binary, 30 requests: median %v", running, median(times))
	})
	e := &apiTarget{"berth", enginetest.Start(t, labOptions())}
	e.startSleepers(running)
	e.stats(running)
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var times []time.Duration
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		times = append(times, benchtest.Timed(func() { e.stats(running) }))
	}
	pprof.StopCPUProfile()
	t.Logf("BENCH stats of %d containers, in-process engine, 100 requests profiled: median %v", running, median(times))
}
