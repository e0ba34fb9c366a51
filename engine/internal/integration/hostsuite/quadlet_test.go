package hostsuite

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/poll"
	"github.com/berth-project/berth/engine/internal/testsupport/tartest"
)

// systemctl runs systemctl with args; it answers the trimmed output.
func systemctl(t testing.TB, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "systemctl", args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// TestQuadletHandOverToSystemd: under a real systemd (PID 1), a .container
// quadlet installed through the API with reloadSystemd=true becomes a
// service systemd knows (daemon-reload by the engine); systemctl start runs
// the container through podman 4.3.1's remote client; when the container's
// process is killed, systemd restarts the service (Restart=on-failure) and
// a new container runs; systemctl stop removes it; removing the quadlet
// removes the service. Where systemd does not run, the hand-over is a 400.
func TestQuadletHandOverToSystemd(t *testing.T) {
	p := startEngineProcess(t)
	unit := "[Unit]\nDescription=Berth host suite quadlet\n\n[Container]\nImage=localhost/busybox:latest\nContainerName=hq\nExec=sleep 600\n" +
		"Ulimit=nofile=100:200\nMount=type=image,source=localhost/busybox:latest,destination=/tools\n\n" +
		"[Service]\nRestart=on-failure\nRestartSec=1\n"
	archive := tartest.Of(t, "hq.container", unit)
	if _, err := os.Stat("/run/systemd/system"); err != nil {
		status, body := p.Do("POST", "/quadlets?reloadSystemd=true", bytes.NewReader(archive))
		if status != http.StatusBadRequest || !strings.Contains(string(body), "reloadSystemd") {
			t.Fatalf("a hand-over where systemd does not run: %d %s", status, body)
		}
		return
	}
	enginetest.RequirePodman(t)
	p.Must(http.StatusOK, "POST", "/quadlets?reloadSystemd=true", bytes.NewReader(archive))
	t.Cleanup(func() {
		systemctl(t, "stop", "hq.service")
		p.Do("DELETE", "/quadlets/hq.container?force=true&reloadSystemd=true", nil)
	})
	if out, err := systemctl(t, "cat", "hq.service"); err != nil || !strings.Contains(out, "--url tcp://"+p.Addr) {
		t.Fatalf("systemctl cat hq.service: %v\n%s", err, out)
	}
	if out, err := systemctl(t, "start", "hq.service"); err != nil {
		t.Fatalf("systemctl start: %v\n%s", err, out)
	}
	// status dumps the unit's state and journal when the test fails.
	status := func() string {
		out, _ := systemctl(t, "status", "--no-pager", "-n", "30", "hq.service")
		return out
	}
	running := func() (inspectData, bool) {
		code, body := p.Do("GET", "/containers/hq/json", nil)
		var d inspectData
		if code != http.StatusOK {
			return d, false
		}
		p.Decode(body, &d)
		return d, d.State.Running
	}
	var first inspectData
	poll.Until(t, 2*time.Minute, "the quadlet's container running", func() bool {
		var ok bool
		first, ok = running()
		return ok
	})
	if out, _ := systemctl(t, "is-active", "hq.service"); out != "active" {
		t.Fatalf("hq.service is %q with its container running\n%s", out, status())
	}
	// Ulimit= and Mount=type=image went through the service's podman run.
	proc := "/proc/" + strconv.Itoa(first.State.Pid)
	if limits, _ := os.ReadFile(proc + "/limits"); !strings.Contains(string(limits), "Max open files            100                  200") {
		t.Errorf("the service's container limits:\n%s", limits)
	}
	if _, err := os.Stat(proc + "/root/tools/bin/busybox"); err != nil {
		t.Errorf("the service's container lacks its image mount: %v", err)
	}
	// The container's process dies: podman run fails, systemd restarts
	// the service, which runs the container again.
	if err := syscall.Kill(first.State.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		d, ok := running()
		if ok && d.ID != first.ID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new container after the first was killed (now %+v)\n%s", d.State, status())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if out, _ := systemctl(t, "show", "-p", "NRestarts", "--value", "hq.service"); out == "" || out == "0" {
		t.Fatalf("NRestarts %q after the kill\n%s", out, status())
	} else if n, _ := strconv.Atoi(out); n < 1 {
		t.Fatalf("NRestarts %q", out)
	}
	// systemd stops it: the container goes.
	if out, err := systemctl(t, "stop", "hq.service"); err != nil {
		t.Fatalf("systemctl stop: %v\n%s", err, out)
	}
	if out, _ := systemctl(t, "is-active", "hq.service"); out != "inactive" && out != "failed" {
		t.Fatalf("hq.service after stop: %q", out)
	}
	poll.Until(t, time.Minute, "the container removed by the service's stop", func() bool {
		code, _ := p.Do("GET", "/containers/hq/json", nil)
		return code == http.StatusNotFound
	})
	p.Must(http.StatusOK, "DELETE", "/quadlets/hq.container?reloadSystemd=true", nil)
	if out, _ := systemctl(t, "cat", "hq.service"); !strings.Contains(out, "No files found") {
		t.Fatalf("hq.service after the quadlet's removal:\n%s", out)
	}
}
