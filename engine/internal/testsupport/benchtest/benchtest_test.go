package benchtest

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestRLimits(t *testing.T) {
	t.Setenv("BERTH_BENCH_RLIMIT_NOFILE", "1024")
	t.Setenv("BERTH_BENCH_RLIMIT_NPROC", "")
	rl := RLimits()
	if len(rl) != 1 || rl[0]["type"] != "nofile" || rl[0]["hard"] != uint64(1024) || rl[0]["soft"] != uint64(1024) {
		t.Fatalf("RLimits with NOFILE alone: %v", rl)
	}
	t.Setenv("BERTH_BENCH_RLIMIT_NOFILE", "")
	if rl := RLimits(); rl != nil {
		t.Fatalf("RLimits without the variables: %v", rl)
	}
}

// TestSpec: the busybox image, the command, the fields, and r_limits only
// when hack/bench.sh set them.
func TestSpec(t *testing.T) {
	t.Setenv("BERTH_BENCH_RLIMIT_NOFILE", "")
	t.Setenv("BERTH_BENCH_RLIMIT_NPROC", "")
	spec := Spec(map[string]any{"stop_timeout": 0}, "sleep", "1")
	if spec["image"] != "localhost/busybox:latest" || len(spec["command"].([]string)) != 2 || spec["stop_timeout"] != 0 {
		t.Fatalf("Spec: %v", spec)
	}
	if _, ok := spec["r_limits"]; ok {
		t.Fatalf("Spec without the variables carries r_limits: %v", spec)
	}
	t.Setenv("BERTH_BENCH_RLIMIT_NPROC", "4096")
	if rl, _ := Spec(nil, "true")["r_limits"].([]map[string]any); len(rl) != 1 || rl[0]["type"] != "nproc" {
		t.Fatalf("Spec with NPROC: r_limits %v", rl)
	}
}

func TestAlternateAndMedian(t *testing.T) {
	var order []string
	var bs, ps []time.Duration
	testing.Benchmark(func(b *testing.B) {
		order = nil
		bs, ps = Alternate(b, 3, [2]time.Duration{}, func(n int) time.Duration {
			order = append(order, "b")
			return time.Duration(n)
		}, func(n int) time.Duration {
			order = append(order, "p")
			return time.Duration(10 * n)
		})
	})
	if len(bs) == 0 || len(bs) != len(ps) || len(order) != 2*len(bs) {
		t.Fatalf("%d berth and %d podman measurements in order %v", len(bs), len(ps), order)
	}
	for i, who := range order {
		if want := []string{"b", "p"}[i%2]; who != want {
			t.Fatalf("measurement %d was %s's, want %s's: %v", i, who, want, order)
		}
	}
	if bs[0] != 0 || ps[2] != 20 {
		t.Fatalf("rounds not numbered: %v %v", bs, ps)
	}
	if m := Median([]time.Duration{4, 1, 3, 2}); m != 3 {
		t.Fatalf("median of 1..4 = %v, want the upper middle 3", m)
	}
}

func TestListThroughput(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/short" {
			w.Write([]byte(`[1]`))
			return
		}
		w.Write([]byte(`[1,2,3]`))
	}))
	defer srv.Close()
	if r := ListThroughput(srv.URL+"/whole", 3, 200*time.Millisecond); r <= 0 {
		t.Fatalf("no complete listing counted: %v/s", r)
	}
	if r := ListThroughput(srv.URL+"/short", 3, 200*time.Millisecond); r != 0 {
		t.Fatalf("short listings counted: %v/s", r)
	}
}

// TestThroughput: both sides run b.N times and the metrics say which was
// faster.
func TestThroughput(t *testing.T) {
	var berthRuns, podmanRuns int
	res := testing.Benchmark(func(b *testing.B) {
		berthRuns, podmanRuns = 0, 0
		Throughput(b, "op", func() { berthRuns++ }, func() { podmanRuns++; time.Sleep(100 * time.Microsecond) })
	})
	if berthRuns != res.N || podmanRuns != res.N {
		t.Fatalf("%d berth and %d podman runs for b.N = %d", berthRuns, podmanRuns, res.N)
	}
	if res.Extra["berth-ns/op"] <= 0 || res.Extra["podman-ns/op"] < 100e3 || res.Extra["x-podman-throughput"] <= 1 {
		t.Fatalf("metrics %v", res.Extra)
	}
}
