package hostsuite

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
)

// TestJournaldLogDriver: where journald runs, podman 4.3.1's run
// --log-driver journald sends the container's lines to the journal with
// conmon's fields (CONTAINER_ID_FULL, CONTAINER_NAME, SYSLOG_IDENTIFIER,
// the tag), and podman logs reads them back through the engine: stdout and
// stderr apart, --tail, --since, and -f until the container exits. Where
// journald does not run, the driver is a 400 saying so and info does not
// list it.
func TestJournaldLogDriver(t *testing.T) {
	l := startLab(t)
	var info struct {
		Plugins struct{ Log []string }
	}
	l.Get("/info", &info)
	if _, err := os.Stat("/run/systemd/journal/socket"); err != nil {
		status, body := l.Do("POST", "/containers/create", map[string]any{"image": "localhost/busybox:latest", "name": "jd-refused",
			"log_configuration": map[string]any{"driver": "journald"}})
		if status != http.StatusBadRequest || !strings.Contains(string(body), "log_configuration.driver") ||
			!strings.Contains(string(body), "journald does not run on this host") {
			t.Fatalf("journald where it does not run: %d %s", status, body)
		}
		if status, _ := l.Do("GET", "/containers/jd-refused/json", nil); status != http.StatusNotFound {
			t.Fatalf("the refused container exists: %d", status)
		}
		if slices.Contains(info.Plugins.Log, "journald") {
			t.Fatalf("info lists journald where it does not run: %v", info.Plugins.Log)
		}
		return
	}
	enginetest.RequirePodman(t)
	if !slices.Contains(info.Plugins.Log, "journald") {
		t.Fatalf("info does not list journald: %v", info.Plugins.Log)
	}
	// A container that writes to both streams, a long line (conmon sends
	// a piece of it as a partial entry when it exceeds its buffer), pauses,
	// and ends.
	long := strings.Repeat("x", 10000)
	id := strings.TrimSpace(l.PodmanStdout("run", "-d", "--name", "jd", "--log-driver", "journald", "--log-opt", "tag=jdtag",
		"localhost/busybox:latest", "sh", "-c", "echo out1; echo err1 >&2; sleep 3; echo "+long+"; echo out2"))
	// Follow from the start: it returns once the container has exited,
	// with every line.
	stdout, stderr, err := l.PodmanOutput("logs", "-f", "jd")
	if err != nil {
		t.Fatalf("podman logs -f: %v\n%s", err, stderr)
	}
	if stdout != "out1\n"+long+"\nout2\n" || stderr != "err1\n" {
		t.Fatalf("podman logs -f: stdout %.200q, stderr %q", stdout, stderr)
	}
	if code := l.Wait(id); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if stdout, _, _ := l.PodmanOutput("logs", "--tail", "1", "jd"); stdout != "out2\n" {
		t.Fatalf("podman logs --tail 1: %q", stdout)
	}
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if stdout, stderr, _ := l.PodmanOutput("logs", "--since", future, "jd"); stdout != "" || stderr != "" {
		t.Fatalf("podman logs --since the future: %q %q", stdout, stderr)
	}
	if out := strings.TrimSpace(l.PodmanStdout("inspect", "--format", "{{.HostConfig.LogConfig.Type}} {{.HostConfig.LogConfig.Tag}}", "jd")); out != "journald jdtag" {
		t.Fatalf("inspect LogConfig: %q", out)
	}
	// What conmon put in the journal.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "journalctl", "-o", "json", "--all", "CONTAINER_ID_FULL="+id).Output()
	if err != nil {
		t.Fatalf("journalctl: %v", err)
	}
	n := 0
	for sc := bufio.NewScanner(strings.NewReader(string(out))); sc.Scan(); n++ {
		var e map[string]any
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("journalctl output %q: %v", sc.Text(), err)
		}
		if e["CONTAINER_NAME"] != "jd" || e["CONTAINER_ID"] != id[:12] || e["SYSLOG_IDENTIFIER"] != "jdtag" || e["CONTAINER_TAG"] != "jdtag" {
			t.Fatalf("journal entry fields: %v", e)
		}
	}
	if n < 4 {
		t.Fatalf("%d journal entries for the container:\n%s", n, out)
	}
	l.PodmanStdout("rm", "jd")
}
