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
		json.Unmarshal(te.Must(http.StatusCreated, "POST", "/containers/create", benchSpec("sleep", "600")), &out)
		te.Must(http.StatusNoContent, "POST", "/containers/"+out.ID+"/start", nil)
		targets = append(targets, target{te: te, ctr: out.ID})
	}
	cp := func(tg target, dest string) time.Duration {
		url := "tcp://" + strings.TrimPrefix(strings.TrimSuffix(tg.te.URL, "/v4.3.1/libpod"), "http://")
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
	bs, ps := benchtest.Alternate(b, rounds, [2]time.Duration{},
		func(n int) time.Duration { return cp(targets[0], fmt.Sprintf("/copy-%d", n)) },
		func(n int) time.Duration { return cp(targets[1], fmt.Sprintf("/copy-%d", n)) })
	benchtest.Report(b, "podman cp 100 MiB into a container", "goal <= 1", "copies", bs, ps)
}
