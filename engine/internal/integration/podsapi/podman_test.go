package podsapi

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPodmanRemotePods drives the pods API with the podman 4.3.1 client:
// pod create (name, label, hostname, share, infra=false), ps with filters
// and container names, inspect, exists, the lifecycle commands, top,
// stats, run --pod, ps --pod, rm -f and prune.
func TestPodmanRemotePods(t *testing.T) {
	te := startEngine(t)
	te.MustPodman("pod", "create", "--name", "web", "--label", "tier=front", "--hostname", "webhost", "--share", "net,ipc,uts,pid")
	te.MustPodman("pod", "create", "--name", "bare", "--infra=false")
	te.MustPodman("pod", "create", "--name", "pub", "-p", "127.0.0.1:18931:80")
	if out := te.MustPodman("pod", "inspect", "pub", "--format", "{{.InfraConfig.PortBindings}}"); !strings.Contains(out, "18931") {
		t.Fatalf("pod create -p: port bindings %s", out)
	}
	te.MustPodman("pod", "rm", "pub")
	if _, err := te.Podman("pod", "create", "--name", "web"); err == nil {
		t.Fatal("a second pod named web was created")
	}
	te.MustPodman("run", "-d", "--pod", "web", "--name", "srv", "localhost/busybox:latest", "busybox", "httpd", "-f", "-p", "127.0.0.1:8080", "-h", "/etc")
	out := te.MustPodman("run", "--rm", "--pod", "web", "localhost/busybox:latest", "sh", "-c",
		"for i in 1 2 3 4 5 6 7 8 9 10; do busybox wget -q -O - http://127.0.0.1:8080/hostname && break; busybox sleep 0.2; done")
	if strings.TrimSpace(out) != "webhost" {
		t.Fatalf("fetched %q from the pod's server, want webhost", out)
	}
	out = te.MustPodman("ps", "--pod", "--format", "{{.Names}} {{.PodName}}")
	if !strings.Contains(out, "srv web") || !strings.Contains(out, "-infra web") {
		t.Fatalf("ps --pod:\n%s", out)
	}
	out = te.MustPodman("pod", "ps", "--ctr-names", "--filter", "label=tier=front", "--format", "{{.Name}} {{.Status}} {{.ContainerNames}}")
	if !strings.HasPrefix(out, "web Running") || !strings.Contains(out, "srv") {
		t.Fatalf("pod ps --ctr-names --filter label=tier=front:\n%s", out)
	}
	out = te.MustPodman("pod", "ps", "--filter", "status=created", "--format", "{{.Name}}")
	if strings.TrimSpace(out) != "bare" {
		t.Fatalf("pod ps --filter status=created:\n%s", out)
	}
	if out := te.MustPodman("pod", "inspect", "web", "--format", "{{.Hostname}} {{.State}} {{.NumContainers}}"); strings.TrimSpace(out) != "webhost Running 2" {
		t.Fatalf("pod inspect: %s", out)
	}
	te.MustPodman("pod", "exists", "web")
	if _, err := te.Podman("pod", "exists", "nope"); err == nil {
		t.Fatal("pod exists nope succeeded")
	}
	if out := te.MustPodman("pod", "top", "web"); !strings.Contains(out, "catatonit -P") || !strings.Contains(out, "httpd") {
		t.Fatalf("pod top:\n%s", out)
	}
	out = te.MustPodman("pod", "top", "web", "user", "pid", "args")
	if lines := strings.Split(out, "\n"); strings.Join(strings.Fields(lines[0]), " ") != "USER PID COMMAND" ||
		!strings.Contains(out, "catatonit -P") || !strings.Contains(out, "httpd -f") {
		t.Fatalf("pod top web user pid args:\n%s", out)
	}
	out = te.MustPodman("pod", "top", "web", "capeff", "capbnd", "seccomp", "label", "groups", "hgroups", "stime", "huser", "hpid")
	for _, title := range []string{"EFFECTIVE CAPS", "BOUNDING CAPS", "SECCOMP", "LABEL", "GROUPS", "HGROUPS", "STIME", "HUSER", "HPID"} {
		if !strings.Contains(out, title) {
			t.Fatalf("pod top with Podman's other descriptors lacks %s:\n%s", title, out)
		}
	}
	if !strings.Contains(out, "CHOWN,DAC_OVERRIDE") || !strings.Contains(out, " root ") ||
		!(strings.Contains(out, "disabled") || strings.Contains(out, "filter")) {
		t.Fatalf("pod top: the members' capabilities, seccomp mode or host user are missing:\n%s", out)
	}
	if out, err := te.Podman("pod", "top", "web", "nosuchdescriptor"); err == nil || !strings.Contains(out, "nosuchdescriptor") {
		t.Fatalf("pod top with an unknown descriptor: err %v\n%s", err, out)
	}
	if out := te.MustPodman("pod", "stats", "--no-stream", "web"); !strings.Contains(out, "srv") {
		t.Fatalf("pod stats:\n%s", out)
	}
	// pod stats without --no-stream samples every second until stopped.
	streamed, _ := exec.Command("timeout", "5", "podman", "--remote", "--url", "tcp://"+te.Addr,
		"pod", "stats", "--no-reset", "--format", "{{.Name}} {{.CPU}}", "web").CombinedOutput()
	if n := strings.Count(string(streamed), "srv "); n < 2 {
		t.Fatalf("pod stats streamed %d samples of srv in 5 s:\n%s", n, streamed)
	}
	for _, cmd := range [][]string{{"pause"}, {"unpause"}, {"kill", "-s", "USR1"}, {"restart"}, {"stop", "-t", "0"}, {"start"}} {
		te.MustPodman(append(append([]string{"pod"}, cmd...), "web")...)
	}
	if out := te.MustPodman("pod", "inspect", "web", "--format", "{{.State}}"); strings.TrimSpace(out) != "Running" {
		t.Fatalf("after the lifecycle commands the pod is %s", out)
	}
	te.MustPodman("pod", "rm", "-f", "web")
	te.MustPodman("pod", "prune", "-f")
	if out := te.MustPodman("pod", "ps", "--format", "{{.Name}}"); strings.TrimSpace(out) != "bare" {
		t.Fatalf("pods after rm -f web and prune:\n%s", out)
	}
	if out := te.MustPodman("ps", "-a", "--format", "{{.Names}}"); strings.TrimSpace(out) != "" {
		t.Fatalf("containers left:\n%s", out)
	}
}
