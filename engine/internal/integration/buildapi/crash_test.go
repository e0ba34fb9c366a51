package buildapi

import (
	"bufio"
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/tartest"
	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
)

// TestKillDuringBuildLeavesNothing kills the engine (SIGKILL) while a RUN
// step runs, restarts it on the same state and checks that nothing of the
// build is left: no RUN container in runc, no working layer or image, no
// temporary directory, no mount once the engine is stopped.
func TestKillDuringBuildLeavesNothing(t *testing.T) {
	testdeadline.Set(t, 6*time.Minute)
	o := buildOptions(nil)
	o.What = "build crash tests"
	p := enginetest.StartProcess(t, o)
	dir := p.Dir
	layersBefore := layerDirs(t, p.Root)

	tarball := tartest.Files(t, map[string]string{"Containerfile": "FROM localhost/busybox\nRUN echo step-running && sleep 60\n"})
	resp, err := http.Post(p.Base()+"/v4.3.1/libpod/build?layers=1&t=killed", "application/x-tar", bytes.NewReader(tarball))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	var seen []string
	for sc.Scan() && !strings.Contains(sc.Text(), `"step-running\n"`) {
		seen = append(seen, sc.Text())
	}
	p.Kill9()
	resp.Body.Close()
	runcRoot := filepath.Join(p.RunRoot, "runc")
	if !hasBuildContainer(runcRoot) {
		log, _ := os.ReadFile(p.LogPath)
		t.Fatalf("no RUN container was running when the engine was killed (stream %q, runc %v); the test proves nothing\n%s", seen, entries(runcRoot), log)
	}

	p.Start()
	if hasBuildContainer(runcRoot) {
		t.Fatal("the RUN container of the killed build is still known to runc after a restart")
	}
	for _, d := range []string{filepath.Join(p.Root, "tmp"), filepath.Join(p.RunRoot, "build")} {
		for _, name := range entries(d) {
			if strings.HasPrefix(name, "build-") {
				t.Fatalf("%s keeps %s", d, name)
			}
		}
	}
	r, err := http.Get(p.Base() + "/v4.3.1/libpod/images/json?all=true")
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	body.ReadFrom(r.Body)
	r.Body.Close()
	if n := strings.Count(body.String(), `"Id"`); n != 1 {
		t.Fatalf("%d images after the restart, want busybox alone: %s", n, body.String())
	}
	if after := layerDirs(t, p.Root); after != layersBefore {
		t.Fatalf("%d layers after the restart, %d before the build", after, layersBefore)
	}
	// The engine still builds.
	resp, err = http.Post(p.Base()+"/v4.3.1/libpod/build?t=after", "application/x-tar", bytes.NewReader(tartest.Files(t, map[string]string{"Containerfile": "FROM localhost/busybox\nRUN true\n"})))
	if err != nil {
		t.Fatal(err)
	}
	body.Reset()
	body.ReadFrom(resp.Body)
	resp.Body.Close()
	if !strings.Contains(body.String(), `"aux"`) {
		t.Fatalf("build after the restart: %s", body.String())
	}
	p.Stop()
	if m := enginetest.MountsUnder(dir); len(m) > 0 {
		t.Fatalf("mounts left after the engine stopped: %v", m)
	}
}

// hasBuildContainer reports whether runc's state holds a RUN container.
func hasBuildContainer(runcRoot string) bool {
	for _, name := range entries(runcRoot) {
		if strings.HasPrefix(name, "berth-build-") {
			return true
		}
	}
	return false
}

// layerDirs counts the overlay layers in the store under root.
func layerDirs(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	for _, name := range entries(filepath.Join(dir, "storage", "overlay")) {
		if name != "l" && len(name) == 64 {
			n++
		}
	}
	return n
}
