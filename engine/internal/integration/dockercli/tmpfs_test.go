package dockercli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestDockerTmpfsAsDockerd: a tmpfs of the Docker API is mounted as
// dockerd mounts it, noexec, nosuid and nodev unless asked otherwise, and
// empty (the image's content at its destination is not copied in, as the
// libpod API's Podman default does); inspect shows the options as given.
func TestDockerTmpfsAsDockerd(t *testing.T) {
	te := startEngine(t)
	mounts := te.run("docker", "run", "--rm", "--network", "none", "--tmpfs", "/t", "--mount", "type=tmpfs,dst=/m", "--tmpfs", "/x:exec,size=1m",
		"localhost/busybox:latest", "grep", "-E", " /(t|m|x) ", "/proc/mounts")
	for _, line := range strings.Split(strings.TrimSpace(mounts), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			t.Fatalf("mounts: %q", mounts)
		}
		opts := "," + f[3] + ","
		wantExec := f[1] == "/x"
		if strings.Contains(opts, ",noexec,") == wantExec || !strings.Contains(opts, ",nosuid,") || !strings.Contains(opts, ",nodev,") {
			t.Errorf("tmpfs %s mounted %s", f[1], f[3])
		}
	}
	if n := strings.Count(mounts, "\n"); n != 3 {
		t.Fatalf("three tmpfs, got:\n%s", mounts)
	}
	// Empty: the image's /bin is hidden, as under dockerd.
	if msg := te.fails("docker", "run", "--rm", "--network", "none", "--tmpfs", "/bin", "localhost/busybox:latest", "/bin/busybox", "true"); !strings.Contains(msg, "no such file or directory") {
		t.Fatalf("a tmpfs over /bin: %s", msg)
	}
	te.run("docker", "create", "--name", "tmpfs-shown", "--tmpfs", "/t", "--tmpfs", "/x:exec,size=1m", "-v", te.Dir+":/host:ro", "localhost/busybox:latest", "true")
	shown := te.run("docker", "inspect", "-f", "{{json .HostConfig.Tmpfs}} {{json .HostConfig.Binds}}", "tmpfs-shown")
	if want := `{"/t":"","/x":"exec,size=1m"} ["` + te.Dir + `:/host:ro"]`; strings.TrimSpace(shown) != want {
		t.Fatalf("inspect shows %s, want %s", shown, want)
	}
}

// TestDockerCreateFromInspect: a container created from another's inspect
// (its Config and HostConfig sent back, as Watchtower recreates a
// container) is accepted: inspect shows binds and tmpfs options in the
// words Docker's create takes. Before, HostConfig.Binds carried "rbind"
// and the create answered 400 "invalid mode: rbind".
func TestDockerCreateFromInspect(t *testing.T) {
	te := startEngine(t)
	te.run("docker", "create", "--name", "orig", "--network", "none", "-v", te.Dir+":/host:ro", "-v", "data:/data", "--tmpfs", "/t:size=1m",
		"--mount", "type=bind,src="+te.Dir+",dst=/m1,readonly", "--mount", "type=volume,src=mdata,dst=/m2", "--mount", "type=tmpfs,dst=/m3",
		"-e", "A=1", "--label", "l=v", "--restart", "on-failure:2", "localhost/busybox:latest", "sleep", "60")
	var d []struct {
		Config     map[string]any
		HostConfig map[string]any
	}
	if err := json.Unmarshal([]byte(te.run("docker", "inspect", "orig")), &d); err != nil || len(d) != 1 {
		t.Fatalf("inspect: %v", err)
	}
	body := d[0].Config
	body["HostConfig"] = d[0].HostConfig
	data, _ := json.Marshal(body)
	resp, err := http.Post("http://"+te.Addr+"/v1.44/containers/create?name=clone", "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create from inspect: %d %s", resp.StatusCode, answer)
	}
	te.run("docker", "start", "clone")
	format := "{{json .HostConfig.Binds}} {{json .HostConfig.Mounts}} {{json .HostConfig.Tmpfs}} {{.HostConfig.RestartPolicy.Name}} {{.Config.Labels.l}}"
	got := te.run("docker", "inspect", "-f", format, "clone")
	want := te.run("docker", "inspect", "-f", format, "orig")
	if got != want {
		t.Fatalf("the clone: %s, the original: %s", got, want)
	}
	te.run("docker", "rm", "-f", "clone")
}

// TestDockerInspectMountsAsDockerd: HostConfig.Binds and .Mounts are what
// the create sent, apart, and each mount's Mode and Propagation are
// dockerd's: a bind's mode as -v gave it, "z" for a named volume without
// one and for a --mount volume, no propagation for a volume or a tmpfs.
// (Before, --mount's binds and volumes were listed among the Binds,
// Mounts was null and every Mode was empty.) The expected values are
// dockerd 20.10's for the same command, run beside the engine.
func TestDockerInspectMountsAsDockerd(t *testing.T) {
	te := startEngine(t)
	a, b := t.TempDir(), t.TempDir()
	te.run("docker", "create", "--name", "mnt", "-v", "nv1:/n1", "-v", "nv2:/n2:ro", "-v", a+":/z2:rw", "-v", b+":/z3:ro",
		"--mount", "type=bind,src="+a+",dst=/m1,readonly", "--mount", "type=volume,src=nv3,dst=/m2", "--mount", "type=tmpfs,dst=/t1",
		"localhost/busybox:latest", "true")
	// The CLI sends the -v binds in no set order (it walks a map).
	var binds []string
	json.Unmarshal([]byte(te.run("docker", "inspect", "-f", "{{json .HostConfig.Binds}}", "mnt")), &binds)
	slices.Sort(binds)
	if want := []string{a + ":/z2:rw", b + ":/z3:ro", "nv1:/n1", "nv2:/n2:ro"}; !slices.Equal(binds, want) {
		t.Errorf("HostConfig.Binds %q, want %q", binds, want)
	}
	got := te.run("docker", "inspect", "-f", "{{json .HostConfig.Mounts}}|{{json .HostConfig.Tmpfs}}", "mnt")
	want := `[{"Type":"bind","Source":"` + a + `","Target":"/m1","ReadOnly":true},{"Type":"volume","Source":"nv3","Target":"/m2"},{"Type":"tmpfs","Target":"/t1"}]|null`
	if strings.TrimSpace(got) != want {
		t.Errorf("HostConfig.Mounts and Tmpfs:\n%s\nwant\n%s", got, want)
	}
	mounts := te.run("docker", "inspect", "-f", `{{range .Mounts}}{{.Destination}} {{.Type}} mode={{.Mode}} rw={{.RW}} prop={{.Propagation}};{{end}}`, "mnt")
	for _, m := range []string{
		"/n1 volume mode=z rw=true prop=;", "/n2 volume mode=ro rw=false prop=;", "/z2 bind mode=rw rw=true prop=rprivate;",
		"/z3 bind mode=ro rw=false prop=rprivate;", "/m1 bind mode= rw=false prop=rprivate;", "/m2 volume mode=z rw=true prop=;", "/t1 tmpfs mode= rw=true prop=;",
	} {
		if !strings.Contains(mounts, m) {
			t.Errorf("Mounts lack %q: %s", m, mounts)
		}
	}
}

// TestDockerInspectEnvAsDockerd: Config.Env holds the image's and the
// request's variables, not the engine's container=podman, TERM, HOSTNAME
// and HOME (dockerd's neither), unless the request set them; a container
// created from the inspect gets its own hostname. The process's own
// environment is dockerd's: PATH, HOSTNAME and HOME, TERM only with a
// terminal, no container=podman. Config.Volumes is null where none, and
// Config.WorkingDir, StopSignal and StopTimeout are empty or absent where
// neither the request nor the image set them, as dockerd's.
func TestDockerInspectEnvAsDockerd(t *testing.T) {
	te := startEngine(t)
	te.run("docker", "create", "--name", "env-plain", "-e", "A=1", "localhost/busybox:latest", "true")
	te.run("docker", "create", "--name", "env-asked", "-e", "HOSTNAME=mine", "-w", "/tmp", "--stop-signal", "SIGUSR1", "--stop-timeout", "3", "localhost/busybox:latest", "true")
	plain := te.run("docker", "inspect", "-f", "{{json .Config.Env}} {{json .Config.Volumes}} {{json .Config.WorkingDir}} {{json .Config.StopSignal}} {{json .Config.StopTimeout}}", "env-plain")
	if want := `["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","A=1"] null "" "" null`; strings.TrimSpace(plain) != want {
		t.Errorf("env-plain's Config.Env, Volumes, WorkingDir, StopSignal and StopTimeout: %s, want %s", plain, want)
	}
	asked := te.run("docker", "inspect", "-f", "{{json .Config.Env}} {{json .Config.WorkingDir}} {{json .Config.StopSignal}} {{json .Config.StopTimeout}}", "env-asked")
	if !strings.Contains(asked, `"HOSTNAME=mine"`) || !strings.HasSuffix(strings.TrimSpace(asked), `"/tmp" "SIGUSR1" 3`) {
		t.Errorf("env-asked's Config.Env, WorkingDir, StopSignal and StopTimeout: %s", asked)
	}
	te.run("docker", "start", "env-plain")
	if after := te.run("docker", "inspect", "-f", "{{json .Config.Env}}", "env-plain"); strings.Contains(after, "HOME=") || strings.Contains(after, "HOSTNAME=") || strings.Contains(after, "TERM=") {
		t.Errorf("env-plain's Config.Env after its start: %s", after)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--rm", "--name", "env-run", "localhost/busybox:latest", "env"}, "HOME=/root HOSTNAME=ID PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		{[]string{"run", "--rm", "-t", "--name", "env-run", "localhost/busybox:latest", "env"}, "HOME=/root HOSTNAME=ID PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin TERM=xterm"},
		{[]string{"run", "--rm", "-u", "nobody", "--name", "env-run", "localhost/busybox:latest", "env"}, "HOME=/nonexistent HOSTNAME=ID PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
	} {
		out := strings.Fields(strings.ReplaceAll(te.run("docker", tc.args...), "\r", ""))
		slices.Sort(out)
		for i, kv := range out {
			if strings.HasPrefix(kv, "HOSTNAME=") && len(kv) == len("HOSTNAME=")+12 {
				out[i] = "HOSTNAME=ID"
			}
		}
		if got := strings.Join(out, " "); got != tc.want {
			t.Errorf("docker %v: %s, want %s", tc.args, got, tc.want)
		}
	}
	// An exec in a container with a terminal: TERM only with its own.
	te.run("docker", "run", "-d", "-t", "--name", "env-tty", "localhost/busybox:latest", "sleep", "300")
	if out := te.run("docker", "exec", "env-tty", "env"); strings.Contains(out, "TERM=") {
		t.Errorf("docker exec without -t in a -t container: %s, want no TERM (dockerd's)", out)
	}
	if out := te.run("docker", "exec", "-t", "env-tty", "env"); !strings.Contains(out, "TERM=xterm") {
		t.Errorf("docker exec -t: %s, want TERM=xterm", out)
	}
}
