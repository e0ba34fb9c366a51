package quadletsapi

import (
	"encoding/json"
	"math/rand/v2"
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
)

const (
	crashNetwork   = "[Network]\n"
	crashContainer = "[Container]\nImage=localhost/busybox:latest\nNetwork=bqa-crash.network\nVolume=bqa-cdata.volume:/data\nExec=sleep 1000\nStopTimeout=1\n[Service]\nRestart=always\n"
)

// TestQuadletActivationSurvivesKill kills the engine (SIGKILL) while
// quadlets are being activated, then after they were, and checks after
// each restart that the state is consistent (a quadlet is either active
// with its objects or, when its activation was cut short, gone with
// every object it and its dependencies' activation made — or installed
// and inactive when the kill fell between the install and the record) and that forced removal leaves no container,
// conmon, runc state, network namespace or mount behind.
func TestQuadletActivationSurvivesKill(t *testing.T) {
	testdeadline.Set(t, testdeadline.Default)
	enginetest.RequireRuntime(t, "quadlet crash tests")
	if testing.Short() {
		t.Skip("builds and runs the engine binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "berth-engine")
	build := exec.Command("go", "build", "-o", bin, "github.com/berth-project/berth/engine/cmd/berth-engine")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build berth-engine: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	root, runRoot := filepath.Join(dir, "root"), filepath.Join(dir, "run")
	args := append([]string{"--listen", "tcp://" + addr, "--root", root, "--runroot", runRoot, "--activate-quadlets"},
		enginetest.NetworkFlags(enginetest.UniqueNetworks(t))...)
	var cmd *exec.Cmd
	start := func() {
		cmd = exec.Command(bin, args...)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if resp, err := http.Get("http://" + addr + "/libpod/_ping"); err == nil {
				resp.Body.Close()
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("engine did not answer _ping")
			}
		}
	}
	kill9 := func() {
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
	}
	start()
	te := &testEngine{t: t, url: "http://" + addr + "/v4.3.1/libpod", root: root, client: &http.Client{}}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			te.do("DELETE", "/quadlets?all=true&force=true", nil)
			enginetest.RemoveAll(te.do)
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
		}
		enginetest.UnmountUnder(dir, 3)
	})
	te.loadBusybox()
	te.must(http.StatusOK, "POST", "/quadlets", tarOf(t, "bqa-cdata.volume", "[Volume]\n"))

	// Kills during activation: the network and volume are activated as
	// dependencies of the container in the same request.
	for round := 0; round < 3; round++ {
		te.must(http.StatusOK, "POST", "/quadlets?activate=false&replace=true", tarOf(t, "bqa-crash.network", crashNetwork))
		done := make(chan struct{})
		go func() {
			defer close(done)
			client := &http.Client{Timeout: 20 * time.Second}
			resp, err := client.Post(te.url+"/quadlets", "application/x-tar", tarOf(t, "bqa-crash.container", crashContainer))
			if err == nil {
				resp.Body.Close()
			}
		}()
		time.Sleep(time.Duration(rand.IntN(400)) * time.Millisecond)
		kill9()
		<-done
		start()
		st := te.quadletStatus()
		ctr := te.exists("/containers/systemd-bqa-crash")
		switch status, installed := st["bqa-crash.container"]; {
		case installed && status == "active/running" && ctr && te.exists("/networks/systemd-bqa-crash"):
		case (!installed || status == "Not loaded") && !ctr && !te.exists("/networks/systemd-bqa-crash") && st["bqa-crash.network"] == "Not loaded":
			// cut short before its record: the unit is installed, not active
		default:
			t.Fatalf("round %d: inconsistent after the kill: statuses %v, container exists %v", round, st, ctr)
		}
		te.must(http.StatusOK, "DELETE", "/quadlets?quadlets=bqa-crash.container&quadlets=bqa-crash.network&quadlets=bqa-cdata.volume&force=true&ignore=true", nil)
		te.must(http.StatusOK, "POST", "/quadlets", tarOf(t, "bqa-cdata.volume", "[Volume]\n"))
	}

	// A kill after activation: everything is adopted and removable.
	te.must(http.StatusOK, "POST", "/quadlets?activate=false", tarOf(t, "bqa-crash.network", crashNetwork))
	te.must(http.StatusOK, "POST", "/quadlets", tarOf(t, "bqa-crash.container", crashContainer))
	var inspect struct {
		ID    string `json:"Id"`
		State struct{ Running bool }
	}
	json.Unmarshal(te.must(http.StatusOK, "GET", "/containers/systemd-bqa-crash/json", nil), &inspect)
	kill9()
	start()
	st := te.quadletStatus()
	if st["bqa-crash.container"] != "active/running" || st["bqa-crash.network"] != "active/exited" || st["bqa-cdata.volume"] != "active/exited" {
		t.Fatalf("statuses after the restart: %v", st)
	}
	te.mustFail(http.StatusConflict, "DELETE", "/quadlets/bqa-crash.container", nil, "force is not set")
	te.must(http.StatusOK, "DELETE", "/quadlets?all=true&force=true", nil)
	if te.exists("/containers/systemd-bqa-crash") || te.exists("/networks/systemd-bqa-crash") || te.exists("/volumes/systemd-bqa-cdata") {
		t.Fatal("an object outlived its quadlet")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		l := leftovers(root, runRoot, inspect.ID)
		if len(l) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("left behind after the forced removal:\n%s", strings.Join(l, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// leftovers lists what a removed container may leave: its conmon, runc
// state, network namespace and mounts under the engine's directories, and
// an aardvark-dns serving the engine's networks (none has DNS once the
// quadlet's network is gone).
func leftovers(root, runRoot, id string) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, _ := os.ReadFile(p)
		cmd := strings.ReplaceAll(string(data), "\x00", " ")
		if strings.Contains(cmd, "conmon") && strings.Contains(cmd, id) ||
			strings.Contains(cmd, "aardvark-dns") && strings.Contains(cmd, runRoot) {
			out = append(out, "process "+cmd)
		}
	}
	if _, err := os.Stat(filepath.Join(runRoot, "runc", id)); err == nil {
		out = append(out, "runc state "+id)
	}
	if netns, _ := filepath.Glob(filepath.Join(runRoot, "netns", "*"+id+"*")); len(netns) > 0 {
		out = append(out, "network namespaces "+strings.Join(netns, " "))
	}
	mounts, _ := os.ReadFile("/proc/self/mounts")
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.Contains(f[1], id) {
			out = append(out, "mount "+f[1])
		}
	}
	return out
}
