package containers_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/engine"
	"github.com/berth-project/berth/engine/internal/testsupport/benchtest"
	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
)

// startBenchCRIUEngine is a Berth engine with the CRIU hack/bench.sh found
// (the same one the Podman service has first in its PATH).
func startBenchCRIUEngine(b *testing.B) *testEngine {
	b.Helper()
	benchtest.Require(b)
	criu := enginetest.RequireCRIU(b)
	return startEngine(b, func(c *engine.Config) { c.CRIU = criu })
}

// checkpointCycle checkpoints the running container id and restores it,
// and returns how long the two requests took and how much of it the OCI
// runtime (CRIU) took by the engine's own report.
func checkpointCycle(te *testEngine, id string) (total, runtime time.Duration) {
	var ck struct {
		D int64 `json:"runtime_checkpoint_duration"`
	}
	var rs struct {
		D int64 `json:"runtime_restore_duration"`
	}
	start := time.Now()
	json.Unmarshal(te.Must(http.StatusOK, "POST", "/containers/"+id+"/checkpoint", nil), &ck)
	json.Unmarshal(te.Must(http.StatusOK, "POST", "/containers/"+id+"/restore", nil), &rs)
	return time.Since(start), time.Duration(ck.D+rs.D) * time.Microsecond
}

// BenchmarkCheckpointRestore: checkpoint + restore of a running busybox
// container (netns none), Berth and Podman 4.3.1 alternating, both with
// the same CRIU. Goal: Berth's median at most 0.5x Podman's.
func BenchmarkCheckpointRestore(b *testing.B) {
	berth := startBenchCRIUEngine(b)
	podman := podmanEngine(b)
	ids := map[*testEngine]string{}
	for _, te := range []*testEngine{berth, podman} {
		id := te.create(benchSpec("sh", "-c", "while true; do sleep 1; done"))
		te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
		checkpointCycle(te, id) // warm up
		ids[te] = id
	}
	const rounds = 8
	var brt []time.Duration
	bs, ps := benchtest.Alternate(b, rounds, [2]time.Duration{200 * time.Millisecond, 500 * time.Millisecond},
		func(int) time.Duration {
			total, rt := checkpointCycle(berth, ids[berth])
			brt = append(brt, rt)
			return total
		},
		// Podman 4.3.1 reports no runtime durations without printStats.
		func(int) time.Duration { total, _ := checkpointCycle(podman, ids[podman]); return total })
	mb, mp, ratio := benchtest.ReportRatio(b, "berth", "podman", bs, ps)
	// The runtime's share is CRIU's dump and restore, the same program
	// for both engines: the floor under either engine's time. CRIU's own
	// part of it is read from its logs (the last timestamp of dump.log and
	// of restore.log), of cycles that keep them.
	var crius []time.Duration
	for j := 0; j < 4; j++ {
		crius = append(crius, criuLoggedCycle(b, berth, ids[berth]))
	}
	mc := benchtest.Median(crius)
	fmt.Printf("checkpoint+restore busybox: berth median %v (of which runc/CRIU %v), podman median %v, ratio %.3f (goal <= 0.5) over %d runs each; CRIU's own dump+restore by its logs %v, %.2fx Podman's median (the floor of the ratio with the same CRIU)\n",
		mb, benchtest.Median(brt), mp, ratio, len(bs), mc, float64(mc)/float64(mp))
}

// criuLoggedCycle checkpoints and restores the running container id
// keeping CRIU's logs, and returns the time CRIU's dump and restore took
// by their own logs.
func criuLoggedCycle(b *testing.B, te *testEngine, id string) time.Duration {
	b.Helper()
	te.Must(http.StatusOK, "POST", "/containers/"+id+"/checkpoint?keep=true", nil)
	te.Must(http.StatusOK, "POST", "/containers/"+id+"/restore?keep=true", nil)
	var d struct {
		State struct{ CheckpointLog, RestoreLog string }
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+id+"/json", nil), &d)
	var total time.Duration
	for _, log := range []string{d.State.CheckpointLog, d.State.RestoreLog} {
		took, err := criuLogDuration(log)
		if err != nil {
			b.Fatal(err)
		}
		total += took
	}
	return total
}

// criuLogDuration is the last "(SS.UUUUUU)" timestamp of a CRIU log: the
// time from CRIU's start to its last line.
func criuLogDuration(file string) (time.Duration, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	stamps := criuStamp.FindAllSubmatch(data, -1)
	if len(stamps) == 0 {
		return 0, fmt.Errorf("%s has no timestamps", file)
	}
	last := stamps[len(stamps)-1]
	sec, _ := strconv.Atoi(string(last[1]))
	usec, _ := strconv.Atoi(string(last[2]))
	return time.Duration(sec)*time.Second + time.Duration(usec)*time.Microsecond, nil
}

var criuStamp = regexp.MustCompile(`(?m)^\((\d+)\.(\d{6})\)`)

// BenchmarkCheckpointExportImport64MiB: a container holding 64 MiB of
// memory is checkpointed with export on one engine and imported on
// another, against copying its checkpoint files (cp -r of CRIU's images).
// Goal: export + import within 3x the copy.
func BenchmarkCheckpointExportImport64MiB(b *testing.B) {
	from := startBenchCRIUEngine(b)
	to := startBenchCRIUEngine(b)
	spec := benchSpec("sh", "-c", `x=$(head -c 67108864 /dev/zero | tr '\000' a); echo ready; while true; do sleep 1; done`)
	spec["name"] = "big"
	id := from.create(spec)
	from.Must(http.StatusNoContent, "POST", "/containers/big/start", nil)
	from.waitLog(id, 1)
	var d struct{ StaticDir string }
	json.Unmarshal(from.Must(http.StatusOK, "GET", "/containers/big/json", nil), &d)
	dir := b.TempDir()
	archive := filepath.Join(dir, "big.tar")

	// moveOnce exports (leaving the container running for the next round)
	// and imports under a new name; the import is removed afterwards.
	n := 0
	var restores []time.Duration
	moveOnce := func() time.Duration {
		n++
		start := time.Now()
		f, err := os.Create(archive)
		if err != nil {
			b.Fatal(err)
		}
		resp, err := http.Post(from.URL+"/containers/big/checkpoint?export=true&leaveRunning=true", "", nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(f, resp.Body); err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("export: %d %v", resp.StatusCode, err)
		}
		resp.Body.Close()
		f.Close()
		in, err := os.Open(archive)
		if err != nil {
			b.Fatal(err)
		}
		name := "big" + strconv.Itoa(n)
		var report struct {
			D int64 `json:"runtime_restore_duration"`
		}
		json.Unmarshal(to.Must(http.StatusOK, "POST", "/containers/import/restore?import=true&name="+name, in), &report)
		in.Close()
		took := time.Since(start)
		restores = append(restores, time.Duration(report.D)*time.Microsecond)
		to.Must(http.StatusOK, "DELETE", "/containers/"+name+"?force=true&timeout=0", nil)
		return took
	}
	// copyOnce copies the files of a checkpoint kept in place. That dump's
	// runtime duration stands for the export's (whose answer is the archive,
	// without the figure), so that the archive part alone can be told.
	var dumps []time.Duration
	copyOnce := func() time.Duration {
		var ck struct {
			D int64 `json:"runtime_checkpoint_duration"`
		}
		json.Unmarshal(from.Must(http.StatusOK, "POST", "/containers/big/checkpoint?leaveRunning=true&keep=true", nil), &ck)
		dumps = append(dumps, time.Duration(ck.D)*time.Microsecond)
		dst := filepath.Join(dir, "copy")
		os.RemoveAll(dst)
		start := time.Now()
		if out, err := exec.Command("cp", "-r", filepath.Join(d.StaticDir, "checkpoint"), dst).CombinedOutput(); err != nil {
			b.Fatalf("cp: %v %s", err, out)
		}
		return time.Since(start)
	}
	moveOnce()
	copyOnce()
	restores, dumps = nil, nil
	var ms, cs []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := 0; j < 4; j++ {
			ms = append(ms, moveOnce())
			cs = append(cs, copyOnce())
		}
	}
	b.StopTimer()
	fi, _ := os.Stat(archive)
	var size bytes.Buffer
	fmt.Fprintf(&size, "%d MiB", fi.Size()>>20)
	mm, mc, ratio := benchtest.ReportRatio(b, "move", "copy", ms, cs)
	// The archive part alone: each move less its CRIU restore and the
	// dump time of the checkpoint taken beside it (CRIU's floor).
	var parts []time.Duration
	for i := range ms {
		parts = append(parts, ms[i]-restores[i]-dumps[i])
	}
	mpart := benchtest.Median(parts)
	fmt.Printf("export+import of a 64 MiB container (archive %s): median %v (of which CRIU's restore %v, CRIU's dump about %v), copying its checkpoint files %v, ratio %.2f (goal <= 3) over %d runs; the archive part alone (move minus dump and restore) %v, %.2fx the copy\n",
		size.String(), mm, benchtest.Median(restores), benchtest.Median(dumps), mc, ratio, len(ms), mpart, float64(mpart)/float64(mc))
}
