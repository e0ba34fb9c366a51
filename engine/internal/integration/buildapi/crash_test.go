package buildapi

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
	"github.com/berth-project/berth/engine/testimage"
)

// engineProcess is berth-engine running as a process of its own, so that
// it can be killed.
type engineProcess struct {
	t          *testing.T
	binary     string
	root, logs string
	url        string
	cmd        *exec.Cmd
}

func (p *engineProcess) start() {
	p.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		p.t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p.url = "http://" + addr
	logFile, err := os.OpenFile(p.logs, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	defer logFile.Close()
	p.cmd = exec.Command(p.binary, "--listen", "tcp://"+addr, "--root", filepath.Join(p.root, "root"), "--runroot", filepath.Join(p.root, "run"))
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(p.url + "/libpod/_ping"); err == nil {
			resp.Body.Close()
			return
		}
	}
	log, _ := os.ReadFile(p.logs)
	p.t.Fatalf("engine did not answer:\n%s", log)
}

func (p *engineProcess) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_, _ = p.cmd.Process.Wait()
}

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

// TestKillDuringBuildLeavesNothing kills the engine (SIGKILL) while a RUN
// step runs, restarts it on the same state and checks that nothing of the
// build is left: no RUN container in runc, no working layer or image, no
// temporary directory, no mount once the engine is stopped.
func TestKillDuringBuildLeavesNothing(t *testing.T) {
	testdeadline.Set(t, 6*time.Minute)
	enginetest.RequireRuntime(t, "build crash tests")
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is needed to build berth-engine")
	}
	dir := t.TempDir()
	binary := filepath.Join(dir, "berth-engine")
	build := exec.Command(goTool, "build", "-tags", "containers_image_openpgp,exclude_graphdriver_btrfs,exclude_graphdriver_devicemapper",
		"-o", binary, "github.com/berth-project/berth/engine/cmd/berth-engine")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building berth-engine: %v\n%s", err, out)
	}
	p := &engineProcess{t: t, binary: binary, root: dir, logs: filepath.Join(dir, "engine.log")}
	t.Cleanup(func() {
		if p.cmd != nil && p.cmd.ProcessState == nil {
			p.kill()
		}
		enginetest.UnmountUnder(dir, 3)
	})
	p.start()
	var archive bytes.Buffer
	if err := testimage.DockerArchive(&archive, testimage.Busybox("localhost/busybox:latest")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(p.url+"/v4.3.1/libpod/images/load", "application/x-tar", &archive)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	layersBefore := layerDirs(t, dir)

	tarball := contextTar(t, map[string]string{"Containerfile": "FROM localhost/busybox\nRUN echo step-running && sleep 60\n"})
	resp, err = http.Post(p.url+"/v4.3.1/libpod/build?layers=1&t=killed", "application/x-tar", bytes.NewReader(tarball))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	var seen []string
	for sc.Scan() && !strings.Contains(sc.Text(), `"step-running\n"`) {
		seen = append(seen, sc.Text())
	}
	p.kill()
	resp.Body.Close()
	runcRoot := filepath.Join(dir, "run", "runc")
	if !hasBuildContainer(runcRoot) {
		log, _ := os.ReadFile(p.logs)
		t.Fatalf("no RUN container was running when the engine was killed (stream %q, runc %v); the test proves nothing\n%s", seen, entries(runcRoot), log)
	}

	p.start()
	if hasBuildContainer(runcRoot) {
		t.Fatal("the RUN container of the killed build is still known to runc after a restart")
	}
	for _, d := range []string{filepath.Join(dir, "root", "tmp"), filepath.Join(dir, "run", "build")} {
		for _, name := range entries(d) {
			if strings.HasPrefix(name, "build-") {
				t.Fatalf("%s keeps %s", d, name)
			}
		}
	}
	r, err := http.Get(p.url + "/v4.3.1/libpod/images/json?all=true")
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	body.ReadFrom(r.Body)
	r.Body.Close()
	if n := strings.Count(body.String(), `"Id"`); n != 1 {
		t.Fatalf("%d images after the restart, want busybox alone: %s", n, body.String())
	}
	if after := layerDirs(t, dir); after != layersBefore {
		t.Fatalf("%d layers after the restart, %d before the build", after, layersBefore)
	}
	// The engine still builds.
	resp, err = http.Post(p.url+"/v4.3.1/libpod/build?t=after", "application/x-tar", bytes.NewReader(contextTar(t, map[string]string{"Containerfile": "FROM localhost/busybox\nRUN true\n"})))
	if err != nil {
		t.Fatal(err)
	}
	body.Reset()
	body.ReadFrom(resp.Body)
	resp.Body.Close()
	if !strings.Contains(body.String(), `"aux"`) {
		t.Fatalf("build after the restart: %s", body.String())
	}
	p.stop()
	if m := mountsUnder(dir); len(m) > 0 {
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

// layerDirs counts the overlay layers in the store.
func layerDirs(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	for _, name := range entries(filepath.Join(dir, "root", "storage", "overlay")) {
		if name != "l" && len(name) == 64 {
			n++
		}
	}
	return n
}
