package dockercli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/benchtest"
	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/need"
	"github.com/berth-project/berth/engine/testimage"
)

// The benchmarks compare Berth's Docker API with Debian's dockerd 20.10
// through the same docker CLI: hack/bench.sh starts dockerd on a private
// data root (--iptables=false --bridge=none, so it touches no host
// networking) listening on 127.0.0.1 and exports BERTH_BENCH_DOCKER_HOST.
// Both sides run containers with --network none.

// dockerdPeer is a docker CLI pointed at the bench's dockerd, with
// localhost/busybox:latest loaded.
func dockerdPeer(b *testing.B) *testEngine {
	benchtest.Require(b)
	host := os.Getenv("BERTH_BENCH_DOCKER_HOST")
	if host == "" {
		b.Skip("BERTH_BENCH_DOCKER_HOST is not set (hack/bench.sh starts dockerd when it is installed)")
	}
	dir := b.TempDir()
	config := filepath.Join(dir, "docker-config")
	if err := os.MkdirAll(config, 0o700); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(config, "config.json"), []byte("{}\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	te := &testEngine{Engine: &enginetest.Engine{T: b, Dir: dir, Addr: strings.TrimPrefix(host, "tcp://"), Client: &http.Client{}},
		env: append(os.Environ(), "DOCKER_HOST="+host, "DOCKER_CONFIG="+config, "DOCKER_BUILDKIT=0", "DOCKER_CLI_HINTS=false", "COMPOSE_BAKE=false")}
	var buf bytes.Buffer
	if err := testimage.DockerArchive(&buf, enginetest.BusyboxImage()); err != nil {
		b.Fatal(err)
	}
	te.runIn(&buf, "docker", "load")
	b.Cleanup(func() {
		if ids := strings.Fields(te.run("docker", "ps", "-aq")); len(ids) > 0 {
			te.run("docker", append([]string{"rm", "-f"}, ids...)...)
		}
	})
	return te
}

// timed runs a docker command and answers how long it took.
func timed(te *testEngine, args ...string) time.Duration {
	start := time.Now()
	te.run("docker", args...)
	return time.Since(start)
}

// BenchmarkDockerRunRmTrue: `docker run --rm --network none busybox true`.
// Goal: Berth's median at most 0.4x dockerd's.
func BenchmarkDockerRunRmTrue(b *testing.B) {
	peer := dockerdPeer(b)
	berth := startEngine(b)
	run := func(te *testEngine) func(int) time.Duration {
		return func(int) time.Duration {
			return timed(te, "run", "--rm", "--network", "none", "localhost/busybox:latest", "true")
		}
	}
	benchtest.ComparePeer(b, "dockerd", "docker run --rm true vs dockerd 20.10", "goal <= 0.4", "runs", 9,
		[2]time.Duration{200 * time.Millisecond, 200 * time.Millisecond}, run(berth), run(peer))
}

// createStopped creates n containers through the Docker API (POST
// /containers/create, as `docker create` does).
func createStopped(te *testEngine, n int) {
	body, _ := json.Marshal(map[string]any{"Image": "localhost/busybox:latest", "Cmd": []string{"true"},
		"Labels": map[string]string{"bench": "ps"}, "HostConfig": map[string]any{"NetworkMode": "none"}})
	for i := 0; i < n; i++ {
		resp, err := http.Post("http://"+te.Addr+"/v1.41/containers/create", "application/json", bytes.NewReader(body))
		if err != nil {
			te.T.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			te.T.Fatalf("container create on %s: %s", te.Addr, resp.Status)
		}
	}
}

// BenchmarkDockerPsAll100: GET /v1.41/containers/json?all=1 (what `docker
// ps -a` asks) with 100 containers, from 4 clients; rounds of one second
// each alternate and the medians are compared. Goal: Berth's throughput
// at least 5x dockerd's.
func BenchmarkDockerPsAll100(b *testing.B) {
	peer := dockerdPeer(b)
	berth := startEngine(b)
	createStopped(berth, 100)
	createStopped(peer, 100)
	if out := berth.run("docker", "ps", "-aq"); len(strings.Fields(out)) != 100 {
		b.Fatalf("docker ps -a on Berth listed %d containers, want 100", len(strings.Fields(out)))
	}
	const rounds = 5
	var rb, rp []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := 0; j < rounds; j++ {
			rb = append(rb, benchtest.ListThroughput("http://"+berth.Addr+"/v1.41/containers/json?all=1", 100, time.Second))
			rp = append(rp, benchtest.ListThroughput("http://"+peer.Addr+"/v1.41/containers/json?all=1", 100, time.Second))
		}
	}
	b.StopTimer()
	mb, mp := medianRate(rb), medianRate(rp)
	if mp == 0 {
		b.Fatal("dockerd answered no complete listing")
	}
	b.ReportMetric(mb, "berth-req/s")
	b.ReportMetric(mp, "dockerd-req/s")
	b.ReportMetric(mb/mp, "ratio")
	fmt.Printf("docker ps -a with 100 containers: berth median %.0f req/s, dockerd median %.0f req/s, ratio %.1f (goal >= 5) over %d rounds of 1s each\n", mb, mp, mb/mp, len(rb))
}

// medianRate is the middle of r (the upper one of an even count).
func medianRate(r []float64) float64 {
	d := make([]time.Duration, len(r))
	for i, v := range r {
		d[i] = time.Duration(v * 1000)
	}
	return float64(benchtest.Median(d)) / 1000
}

// benchComposeFile is three services of the busybox image with no network
// (dockerd runs with --bridge=none here).
const benchComposeFile = `services:
  a:
    image: localhost/busybox:latest
    command: ["sleep", "300"]
    network_mode: none
    stop_grace_period: 0s
  b:
    image: localhost/busybox:latest
    command: ["sleep", "300"]
    network_mode: none
    stop_grace_period: 0s
  c:
    image: localhost/busybox:latest
    command: ["sleep", "300"]
    network_mode: none
    stop_grace_period: 0s
    depends_on: [a, b]
`

// BenchmarkDockerComposeUp3: `docker compose up -d` of a 3-service file
// (Compose v2.40.3, hack/docker-compose.sh), `down` between rounds
// untimed. Goal: Berth's median at most 0.5x dockerd's.
func BenchmarkDockerComposeUp3(b *testing.B) {
	peer := dockerdPeer(b)
	compose := need.Cached(b, "BERTH_DOCKER_COMPOSE", "docker-compose-"+composeVersion, "hack/docker-compose.sh")
	berth := startEngine(b)
	project := filepath.Join(berth.Dir, "bench-project")
	if err := os.MkdirAll(project, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, "compose.yaml"), []byte(benchComposeFile), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, te := range []*testEngine{berth, peer} {
		plugins := filepath.Join(te.Dir, "docker-config", "cli-plugins")
		if err := os.MkdirAll(plugins, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.Symlink(compose, filepath.Join(plugins, "docker-compose")); err != nil {
			b.Fatal(err)
		}
		te.env = append(te.env, "COMPOSE_BAKE=false")
	}
	up := func(te *testEngine) func(int) time.Duration {
		return func(n int) time.Duration {
			p := fmt.Sprintf("bench%d", n+1)
			d := timed(te, "compose", "--project-directory", project, "-p", p, "up", "-d")
			te.run("docker", "compose", "--project-directory", project, "-p", p, "down", "-t", "0")
			return d
		}
	}
	benchtest.ComparePeer(b, "dockerd", "docker compose up -d of 3 services vs dockerd 20.10", "goal <= 0.5", "ups", 5,
		[2]time.Duration{200 * time.Millisecond, 200 * time.Millisecond}, up(berth), up(peer))
}
