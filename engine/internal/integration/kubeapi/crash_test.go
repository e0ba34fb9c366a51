package kubeapi

import (
	"encoding/json"
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

// TestKubeDownAfterEngineKill plays a Deployment with a service
// container, kills the engine with SIGKILL, starts it again and checks
// that kube down removes every pod and container the play made, the
// service container included, leaving no conmon, runc state, mount or
// network namespace behind.
func TestKubeDownAfterEngineKill(t *testing.T) {
	testdeadline.Set(t, testdeadline.Default)
	requireRuntime(t)
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
	args := append([]string{"--listen", "tcp://" + addr, "--root", root, "--runroot", runRoot}, enginetest.NetworkFlags(enginetest.UniqueNetworks(t))...)
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
	start()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
		}
		enginetest.UnmountUnder(dir, 3)
	})
	te := &testEngine{t: t, addr: addr, url: "http://" + addr + "/v4.3.1/libpod", root: root, runRoot: runRoot, client: &http.Client{}}
	t.Cleanup(te.removeAll)
	te.loadBusybox()

	yaml := deploymentYAML(freePort(t))
	r := te.play("?serviceContainer=true", yaml)
	ids := []string{r.ServiceContainerID}
	for _, p := range r.Pods {
		ids = append(ids, p.Containers...)
		var pod struct{ InfraContainerID string }
		json.Unmarshal(te.must(http.StatusOK, "GET", "/pods/"+p.ID+"/json", nil), &pod)
		ids = append(ids, pod.InfraContainerID)
	}
	if len(r.Pods) != 4 || len(ids) != 9 || r.ServiceContainerID == "" {
		t.Fatalf("play made %d pods, %d containers", len(r.Pods), len(ids))
	}

	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	start()

	if got := strings.Join(te.podNames(), " "); got != "bkp-app-pod-0:Running bkp-app-pod-1:Running bkp-app-pod-2:Running bkp-single:Running" {
		t.Fatalf("pods after the restart: %q", got)
	}
	var svc struct{ State struct{ Status string } }
	json.Unmarshal(te.must(http.StatusOK, "GET", "/containers/"+r.ServiceContainerID+"/json", nil), &svc)
	if svc.State.Status != "running" {
		t.Fatalf("service container after the restart: %s", svc.State.Status)
	}
	te.must(http.StatusOK, "DELETE", "/kube/play", strings.NewReader(yaml))
	if p := te.pods(); len(p) != 0 {
		t.Fatalf("pods after down: %v", te.podNames())
	}
	var ctrs []map[string]any
	json.Unmarshal(te.must(http.StatusOK, "GET", "/containers/json?all=true", nil), &ctrs)
	if len(ctrs) != 0 {
		t.Fatalf("containers after down: %d", len(ctrs))
	}
	eventually(t, 10*time.Second, "leftovers after kube down", func() (bool, string) {
		l := leaks(root, runRoot, ids)
		return len(l) == 0, strings.Join(l, "\n")
	})
}
