package containers_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/engine"
	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
)

// soakScale reads BERTH_SOAK: unset skips the soak (it is not part of make
// test); "1" runs the full workload; a fraction such as 0.05 a smaller one.
func soakScale(t *testing.T) float64 {
	v := os.Getenv("BERTH_SOAK")
	if v == "" {
		t.Skip("set BERTH_SOAK=1 (make soak) to run the soak workload")
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 || f > 1 {
		t.Fatalf("BERTH_SOAK=%q: want a number in (0, 1]", v)
	}
	return f
}

// resources is what a leak would grow: the engine's (this process's) RSS and
// descriptors, zombie children, mounts under the engine's root and the
// cgroups of removed containers.
type resources struct {
	RSSKiB, FDs, Zombies, Mounts, Cgroups int
}

// measure reads the resources; cgroups are counted for the containers in
// cycled (other engines on the host have their own). It collects garbage and
// returns freed pages to the kernel first, so RSS is what the engine holds,
// not heap the collector has not handed back yet.
func measure(te *testEngine, cycled []string) resources {
	var r resources
	runtime.GC()
	debug.FreeOSMemory()
	status, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			r.RSSKiB, _ = strconv.Atoi(f[1])
		}
	}
	fds, _ := os.ReadDir("/proc/self/fd")
	r.FDs = len(fds)
	procs, _ := os.ReadDir("/proc")
	self := strconv.Itoa(os.Getpid())
	for _, p := range procs {
		stat, err := os.ReadFile(filepath.Join("/proc", p.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		rest := string(stat)[strings.LastIndexByte(string(stat), ')')+1:]
		if f := strings.Fields(rest); len(f) >= 2 && f[0] == "Z" && f[1] == self {
			r.Zombies++
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mounts")
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], filepath.Dir(te.Root)) {
			r.Mounts++
		}
	}
	for _, id := range cycled {
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup/memory/berth", "berth-"+id)); err == nil {
			r.Cgroups++
		}
	}
	return r
}

// soakRetention is how long the soak's engine keeps ended exec sessions
// (Podman's five minutes would leave most of the run's sessions inspectable,
// which is kept state, not a leak).
const soakRetention = 15 * time.Second

// TestSoak runs the workload of issue 14's "Checked by" — 3,000 execs, 500
// log reads, 200 container cycles and 100 readers of the image list — and
// checks that RSS, descriptors, zombies, mounts and cgroups stay within 10%
// of a baseline taken after a warm-up (descriptors with a small absolute
// slack for connections the readers hold open).
func TestSoak(t *testing.T) {
	scale := soakScale(t)
	// Before startEngine, which would give the test the default deadline.
	testdeadline.Set(t, 11*time.Minute)
	te := startEngine(t, func(c *engine.Config) { c.ExecRetention = soakRetention })
	n := func(full int) int { return max(1, int(math.Round(float64(full)*scale))) }
	long := te.create(map[string]any{"command": []string{"sh", "-c", "while true; do echo tick; sleep 1; done"}})
	te.Must(http.StatusNoContent, "POST", "/containers/"+long+"/start", nil)
	var cycled []string
	exec := func() {
		var created struct{ ID string }
		json.Unmarshal(te.Must(http.StatusCreated, "POST", "/containers/"+long+"/exec", map[string]any{"Cmd": []string{"true"}}), &created)
		te.Must(http.StatusOK, "POST", "/exec/"+created.ID+"/start", map[string]any{"Detach": true})
		for deadline := time.Now().Add(10 * time.Second); ; {
			var ins struct{ Running bool }
			json.Unmarshal(te.Must(http.StatusOK, "GET", "/exec/"+created.ID+"/json", nil), &ins)
			if !ins.Running {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("exec %s still running after 10s", created.ID)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	readLogs := func() {
		te.Must(http.StatusOK, "GET", "/containers/"+long+"/logs?stdout=true&tail=10", nil)
	}
	cycle := func() {
		id := te.create(map[string]any{"command": []string{"true"}})
		te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
		te.wait(id)
		te.Must(http.StatusOK, "DELETE", "/containers/"+id, nil)
		cycled = append(cycled, id)
	}

	errs := make(chan error, 16)
	// readers runs 100 readers of the image list until the returned stop
	// is called.
	readers := func() (stop func()) {
		quit := make(chan struct{})
		var wg sync.WaitGroup
		for i := 0; i < 100; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-quit:
						return
					default:
					}
					resp, err := te.Client.Get(te.URL + "/images/json")
					if err != nil {
						errs <- err
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					time.Sleep(50 * time.Millisecond)
				}
			}()
		}
		return func() {
			close(quit)
			wg.Wait()
			te.Client.CloseIdleConnections()
		}
	}
	// settle lets exits and cleanups finish and ended exec sessions pass
	// their retention (the next exec create forgets them), then measures.
	settle := func() resources {
		time.Sleep(soakRetention + time.Second)
		exec()
		time.Sleep(2 * time.Second)
		return measure(te, cycled)
	}
	// Warm up with the readers running, so that first-use allocations and
	// pools are in the baseline: growth measured from there on is what the
	// workload keeps.
	stop := readers()
	for i := 0; i < 50; i++ {
		exec()
	}
	for i := 0; i < 10; i++ {
		readLogs()
		cycle()
	}
	stop()
	before := settle()
	start := time.Now()
	stop = readers()
	// The soak is bounded: on a slow machine it stops each phase at its
	// share of 9 minutes and says how much it did.
	budget := func(share float64) time.Time { return time.Now().Add(time.Duration(share * float64(9*time.Minute))) }
	done := map[string]int{}
	for until := budget(0.65); done["execs"] < n(3000) && time.Now().Before(until); done["execs"]++ {
		exec()
	}
	for until := budget(0.05); done["logs"] < n(500) && time.Now().Before(until); done["logs"]++ {
		readLogs()
	}
	for until := budget(0.3); done["cycles"] < n(200) && time.Now().Before(until); done["cycles"]++ {
		cycle()
	}
	stop()
	select {
	case err := <-errs:
		t.Fatalf("image list reader: %v", err)
	default:
	}
	after := settle()
	fmt.Printf("soak (scale %.2f, %v, done %v of %d execs, %d logs, %d cycles, 100 image list readers throughout):\n  before %+v\n  after  %+v\n",
		scale, time.Since(start).Round(time.Second), done, n(3000), n(500), n(200), before, after)
	for _, c := range []struct {
		name          string
		before, after int
		slack         int
	}{
		{"RSS KiB", before.RSSKiB, after.RSSKiB, 0},
		{"fds", before.FDs, after.FDs, 16},
		{"zombies", before.Zombies, after.Zombies, 0},
		{"mounts", before.Mounts, after.Mounts, 0},
		{"cgroups", before.Cgroups, after.Cgroups, 0},
	} {
		if limit := c.before + c.before/10 + c.slack; c.after > limit {
			t.Errorf("%s grew from %d to %d (limit %d)", c.name, c.before, c.after, limit)
		}
	}
}
