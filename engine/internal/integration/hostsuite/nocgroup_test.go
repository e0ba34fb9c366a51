package hostsuite

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/poll"
)

// TestCgroupsDisabled: cgroups_mode disabled (podman run --cgroups
// disabled) runs a container without a cgroup of its own, in the cgroup
// its conmon stays in, the engine's, as Podman does with crun's
// --cgroup-manager disabled. An engine running runc refuses it (400 naming
// cgroups_mode and crun). Under crun, on the unified hierarchy (crun does
// not run on hybrid v1): what needs a cgroup of the container's own is a
// 400 naming the option, nothing created; the container runs, logs, execs,
// exits with its code; stats, top, pause and resource updates answer 409;
// it survives a kill -9 of the engine and is stopped, killed and removed
// by the restarted one, leaving nothing (the harness checks crun's state
// and the engine's marks too). Where crun is too old for the engine's OCI
// spec (Debian 12's 1.8.1) the crun part is skipped with the reason.
func TestCgroupsDisabled(t *testing.T) {
	t.Run("runc", func(t *testing.T) {
		l := startLab(t)
		before := l.ContainerCount()
		status, body := l.Do("POST", "/containers/create", map[string]any{"image": "localhost/busybox:latest", "cgroups_mode": "disabled"})
		if status != http.StatusBadRequest || !bytes.Contains(body, []byte("cgroups_mode")) || !bytes.Contains(body, []byte("needs crun")) {
			t.Fatalf("cgroups disabled under runc: %d %s", status, body)
		}
		if after := l.ContainerCount(); after != before {
			t.Fatalf("%d containers after a refused create, %d before", after, before)
		}
	})
	t.Run("crun", func(t *testing.T) {
		if !unified() {
			t.Skip("crun needs the unified cgroup v2 hierarchy (it refuses hybrid v1)")
		}
		if _, err := exec.LookPath("crun"); err != nil {
			t.Skip("crun is not installed")
		}
		noCgroupUnderCrun(t)
	})
}

func noCgroupUnderCrun(t *testing.T) {
	p := startEngineProcess(t, "--runtime", "crun")
	l := &lab{p.Engine}
	disabled := func(extra map[string]any) map[string]any {
		spec := map[string]any{"image": "localhost/busybox:latest", "cgroups_mode": "disabled", "command": []string{"true"}}
		for k, v := range extra {
			spec[k] = v
		}
		return spec
	}
	// crun up to 1.8.1 (Debian 12's) refuses a spec whose ociVersion lacks
	// "1.0"; the engine writes oci.SpecVersion for it. Should a crun refuse
	// the version anyway, nothing else can be tested with it.
	probe := l.Create(disabled(nil))
	if status, body := l.Do("POST", "/containers/"+probe+"/start", nil); status != http.StatusNoContent {
		if bytes.Contains(body, []byte("unknown version specified")) {
			out, _ := exec.Command("crun", "--version").Output()
			first, _, _ := strings.Cut(string(out), "\n")
			t.Skipf("%s does not know the engine's OCI spec version: %s", first, body)
		}
		t.Fatalf("start of a container without a cgroup: %d %s", status, body)
	}
	if code := l.Wait(probe); code != 0 {
		t.Fatalf("true without a cgroup exited %d", code)
	}
	l.Must(http.StatusOK, "DELETE", "/containers/"+probe, nil)
	for field, extra := range map[string]map[string]any{
		"cgroup_parent":   {"cgroup_parent": "/berthtest"},
		"cgroupns":        {"cgroupns": map[string]any{"nsmode": "private"}},
		"pidns":           {"pidns": map[string]any{"nsmode": "host"}},
		"resource_limits": {"resource_limits": map[string]any{"memory": map[string]any{"limit": 64 << 20}}},
	} {
		status, body := l.Do("POST", "/containers/create", disabled(extra))
		if status != http.StatusBadRequest || !bytes.Contains(body, []byte("invalid "+field)) || !bytes.Contains(body, []byte(`cgroups_mode \"disabled\"`)) {
			t.Fatalf("cgroups disabled with %s: %d %s", field, status, body)
		}
	}
	if n := l.ContainerCount(); n != 0 {
		t.Fatalf("refused creates left %d containers", n)
	}

	// The container is in the cgroup of its conmon, which is the engine's:
	// the test's own, which the engine process inherited.
	own := readFile(t, "/proc/self/cgroup")
	id := l.Run(disabled(map[string]any{"name": "nocg", "command": []string{"sh", "-c", "cat /proc/self/cgroup; echo ready; trap 'exit 7' TERM; while true; do sleep 0.1; done"}}))
	poll.Until(t, 20*time.Second, "the container's output", func() bool { return strings.Contains(l.Logs(id), "ready") })
	var d struct {
		State struct {
			Pid, ConmonPid int
			CgroupPath     string
		}
		HostConfig struct{ Cgroups, CgroupMode, CgroupnsMode, CgroupParent string }
	}
	l.Decode(l.Must(http.StatusOK, "GET", "/containers/"+id+"/json", nil), &d)
	if d.HostConfig.Cgroups != "disabled" || d.HostConfig.CgroupMode != "host" || d.HostConfig.CgroupnsMode != "host" || d.State.CgroupPath != "" || d.HostConfig.CgroupParent != "" {
		t.Fatalf("inspect of a container without a cgroup: %+v", d)
	}
	inside, _, _ := strings.Cut(l.Logs(id), "ready")
	conmonCg := readFile(t, "/proc/"+strconv.Itoa(d.State.ConmonPid)+"/cgroup")
	ctrCg := readFile(t, "/proc/"+strconv.Itoa(d.State.Pid)+"/cgroup")
	if strings.TrimSpace(inside) != own || conmonCg != own || ctrCg != own {
		t.Fatalf("the container sees itself in %q, is in %q, its conmon in %q; the engine's cgroup is %q", inside, ctrCg, conmonCg, own)
	}

	// What needs a cgroup of the container's own: 409, as Podman answers.
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/containers/stats?stream=false&containers=" + id, nil},
		{"GET", "/containers/" + id + "/top", nil},
		{"POST", "/containers/" + id + "/pause", nil},
		{"POST", "/containers/" + id + "/update", map[string]any{"memory": map[string]any{"limit": 64 << 20}}},
	} {
		status, body := l.Do(c.method, c.path, c.body)
		if status != http.StatusConflict || !bytes.Contains(body, []byte("cgroup")) {
			t.Fatalf("%s %s of a container without a cgroup: %d %s", c.method, c.path, status, body)
		}
	}
	var ex struct {
		ID string `json:"Id"`
	}
	l.Decode(l.Must(http.StatusCreated, "POST", "/containers/"+id+"/exec", map[string]any{"Cmd": []string{"sh", "-c", "exit 5"}}), &ex)
	l.Must(http.StatusOK, "POST", "/exec/"+ex.ID+"/start", map[string]any{"Detach": true})
	var st struct {
		Running  bool
		ExitCode int
	}
	poll.Until(t, 20*time.Second, "the exec ends", func() bool {
		l.Decode(l.Must(http.StatusOK, "GET", "/exec/"+ex.ID+"/json", nil), &st)
		return !st.Running
	})
	if st.ExitCode != 5 {
		t.Fatalf("exec in a container without a cgroup exited %d", st.ExitCode)
	}
	killed := l.Run(disabled(map[string]any{"name": "killed", "command": []string{"sleep", "600"}}))

	p.Kill9()
	p.Start()
	for _, c := range []string{id, killed} {
		if got := l.inspect(c); !got.State.Running {
			t.Fatalf("container %s after the engine's kill -9: %+v", c, got.State)
		}
	}
	l.Must(http.StatusNoContent, "POST", "/containers/"+id+"/stop?timeout=20", nil)
	if got := l.inspect(id); got.State.ExitCode != 7 {
		t.Fatalf("stopped container exited %d, not 7 (its TERM trap)", got.State.ExitCode)
	}
	l.Must(http.StatusNoContent, "POST", "/containers/"+killed+"/kill?signal=KILL", nil)
	if code := l.Wait(killed); code != 137 {
		t.Fatalf("killed container exited %d", code)
	}
	exited := l.Run(disabled(map[string]any{"command": []string{"sh", "-c", "echo bye; exit 3"}}))
	if code := l.Wait(exited); code != 3 || !strings.Contains(l.Logs(exited), "bye") {
		t.Fatalf("container exited %d, logs %q", code, l.Logs(exited))
	}
	for _, c := range []string{id, killed, exited} {
		l.Must(http.StatusOK, "DELETE", "/containers/"+c+"?force=true", nil)
		for _, dir := range []string{"crun", "nocgroup"} {
			if _, err := os.Stat(p.RunRoot + "/" + dir + "/" + c); !os.IsNotExist(err) {
				t.Fatalf("removed container %s left %s/%s: %v", c, dir, c, err)
			}
		}
	}
	poll.Until(t, 10*time.Second, "conmon of the removed container gone", func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(d.State.ConmonPid))
		return os.IsNotExist(err)
	})
}

// readFile reads a file, trimmed.
func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}
