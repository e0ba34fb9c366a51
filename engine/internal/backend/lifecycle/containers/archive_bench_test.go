package containers_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/benchtest"
)

// BenchmarkCopyIntoContainerVsPodman: `podman --remote cp` of a 100 MiB
// file into a running container, the real 4.3.1 client against Berth and
// against the Podman service, rounds alternating. Goal: Berth's median at
// most Podman's.
func BenchmarkCopyIntoContainerVsPodman(b *testing.B) {
	benchtest.Require(b)
	bin, err := exec.LookPath("podman")
	if err != nil {
		b.Fatal("podman is needed")
	}
	berth := startEngine(b)
	podman := podmanEngine(b)
	file := filepath.Join(b.TempDir(), "payload.bin")
	f, err := os.Create(file)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.CopyN(f, rand.Reader, 100<<20); err != nil {
		b.Fatal(err)
	}
	f.Close()
	xdg := b.TempDir()
	type target struct {
		te  *testEngine
		ctr string
	}
	var targets []target
	for _, te := range []*testEngine{berth, podman} {
		var out struct {
			ID string `json:"Id"`
		}
		json.Unmarshal(te.must(http.StatusCreated, "POST", "/containers/create", benchSpec("sleep", "600")), &out)
		te.must(http.StatusNoContent, "POST", "/containers/"+out.ID+"/start", nil)
		targets = append(targets, target{te: te, ctr: out.ID})
	}
	cp := func(tg target, dest string) time.Duration {
		url := "tcp://" + strings.TrimPrefix(strings.TrimSuffix(tg.te.url, "/v4.3.1/libpod"), "http://")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "--remote", "--url", url, "cp", file, tg.ctr+":"+dest)
		cmd.Env = append(os.Environ(), "CONTAINERS_CONF=/dev/null", "XDG_CONFIG_HOME="+xdg)
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("podman cp: %v: %s", err, out)
		}
		return time.Since(start)
	}
	cp(targets[0], "/warm")
	cp(targets[1], "/warm")
	const rounds = 5
	var bs, ps []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := 0; j < rounds; j++ {
			dest := fmt.Sprintf("/copy-%d-%d", i, j)
			bs = append(bs, cp(targets[0], dest))
			ps = append(ps, cp(targets[1], dest))
		}
	}
	b.StopTimer()
	mb, mp := benchtest.Median(bs), benchtest.Median(ps)
	ratio := float64(mb) / float64(mp)
	b.ReportMetric(float64(mb.Microseconds())/1000, "berth-ms")
	b.ReportMetric(float64(mp.Microseconds())/1000, "podman-ms")
	b.ReportMetric(ratio, "ratio")
	fmt.Printf("podman cp 100 MiB into a container: berth median %v, podman median %v, ratio %.3f (goal <= 1) over %d copies each\n", mb, mp, ratio, len(bs))
}
