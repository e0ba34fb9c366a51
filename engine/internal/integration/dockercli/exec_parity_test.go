package dockercli

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// exitCode is the status a client command exited with; -1 where it did
// not run to an exit.
func exitCode(err error) int {
	var exit interface{ ExitCode() int }
	if !errors.As(err, &exit) {
		return -1
	}
	return exit.ExitCode()
}

// TestDockerExecStartFailureAsDockerd: an exec the runtime cannot start
// (a missing command, a missing working directory) ends docker exec with
// dockerd's 126 and dockerd's words on stdout; -d is refused with the same
// words, and exec inspect says 126, while the libpod API keeps Podman's
// 127 for a missing command (compared with dockerd 20.10). Before, docker
// exec exited 127 (126 for -w), printing the runtime's bare error on
// stderr.
func TestDockerExecStartFailureAsDockerd(t *testing.T) {
	te := startEngine(t)
	te.run("docker", "run", "-d", "--network", "none", "--name", "execfail", "localhost/busybox", "sleep", "300")
	for _, args := range [][]string{{"execfail", "nosuchcmd"}, {"-w", "/nonexist", "execfail", "pwd"}} {
		out, errOut, err := te.exec(nil, "docker", append([]string{"exec"}, args...)...)
		if exitCode(err) != 126 {
			t.Errorf("docker exec %v: %v, want exit 126", args, err)
		}
		if !strings.HasPrefix(out, "OCI runtime exec failed: exec failed: ") || !strings.HasSuffix(out, ": unknown\r\n") || errOut != "" {
			t.Errorf("docker exec %v: stdout %q, stderr %q", args, out, errOut)
		}
	}
	contains(t, "docker exec -d nosuchcmd", te.fails("docker", "exec", "-d", "execfail", "nosuchcmd"),
		`OCI runtime exec failed: exec failed: unable to start container process: exec: "nosuchcmd": executable file not found in $PATH: unknown`)

	status, _, body := te.Exchange("POST", "http://"+te.Addr+"/v1.44/containers/execfail/exec", "application/json", strings.NewReader(`{"Cmd":["nosuchcmd"]}`))
	var created struct{ Id string }
	if status != 201 || json.Unmarshal(body, &created) != nil {
		t.Fatalf("exec create: %d %s", status, body)
	}
	if status, _, body := te.Exchange("POST", "http://"+te.Addr+"/v1.44/exec/"+created.Id+"/start", "application/json", strings.NewReader(`{"Detach":true}`)); status != 400 {
		t.Errorf("detached start of a missing command: %d %s, want dockerd's 400", status, body)
	}
	var docker, libpod struct{ ExitCode int }
	_, _, body = te.Exchange("GET", "http://"+te.Addr+"/v1.44/exec/"+created.Id+"/json", "", nil)
	if json.Unmarshal(body, &docker) != nil || docker.ExitCode != 126 {
		t.Errorf("Docker exec inspect: %s, want ExitCode 126", body)
	}
	_, body = te.Do("GET", "/exec/"+created.Id+"/json", nil)
	if json.Unmarshal(body, &libpod) != nil || libpod.ExitCode != 127 {
		t.Errorf("libpod exec inspect: %s, want Podman's ExitCode 127", body)
	}
}

// TestDockerExecUnknownUserAsDockerd: docker exec -u of a user or group the
// container lacks is created, and its start fails as dockerd's does: exit
// 126 with the lookup's words on stdout ("unable to find user X: no
// matching entries in passwd file"), a detached start a 500 in the same
// words. Before, the creation was a 400 'invalid User: user "X": no such
// user or group in the container' and docker exec exited 1. The libpod API
// still refuses it at creation, as Podman does.
func TestDockerExecUnknownUserAsDockerd(t *testing.T) {
	te := startEngine(t)
	te.run("docker", "run", "-d", "--network", "none", "--name", "execuser", "localhost/busybox", "sleep", "300")
	for args, want := range map[string]string{
		"nosuchuser":   "unable to find user nosuchuser: no matching entries in passwd file\r\n",
		"root:nogroup": "unable to find group nogroup: no matching entries in group file\r\n",
	} {
		out, errOut, err := te.exec(nil, "docker", "exec", "-u", args, "execuser", "true")
		if exitCode(err) != 126 || out != want || errOut != "" {
			t.Errorf("docker exec -u %s: %v, stdout %q, stderr %q; want exit 126 and %q", args, err, out, errOut, want)
		}
	}
	contains(t, "docker exec -d -u nosuchuser", te.fails("docker", "exec", "-d", "-u", "nosuchuser", "execuser", "true"),
		"Error response from daemon: unable to find user nosuchuser: no matching entries in passwd file")
	if status, body := te.Do("POST", "/containers/execuser/exec", map[string]any{"User": "nosuchuser", "Cmd": []string{"true"}}); status != 400 {
		t.Errorf("libpod exec create as a missing user: %d %s, want 400", status, body)
	}
}

// TestDockerExecInspectAsDockerd: exec inspect shows DetachKeys as
// dockerd does (the bytes, base64 in JSON; "" where none were asked for),
// leaves out an empty ProcessConfig.user, and a missing session, a paused
// container and a stopped one are refused in dockerd's words (compared
// with dockerd 20.10). Before, DetachKeys was always null, "user":"" was
// shown, and the refusals were worded as Podman's.
func TestDockerExecInspectAsDockerd(t *testing.T) {
	te := startEngine(t)
	te.run("docker", "run", "-d", "--network", "none", "--name", "execinsp", "localhost/busybox", "sleep", "300")
	base := "http://" + te.Addr + "/v1.44"
	inspect := func(body string) map[string]any {
		t.Helper()
		status, _, out := te.Exchange("POST", base+"/containers/execinsp/exec", "application/json", strings.NewReader(body))
		var created struct{ Id string }
		if status != 201 || json.Unmarshal(out, &created) != nil {
			t.Fatalf("exec create: %d %s", status, out)
		}
		_, _, out = te.Exchange("GET", base+"/exec/"+created.Id+"/json", "", nil)
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("exec inspect: %s", out)
		}
		return got
	}
	got := inspect(`{"Cmd":["true"],"DetachKeys":"ctrl-x"}`)
	if got["DetachKeys"] != "GA==" {
		t.Errorf("DetachKeys of ctrl-x: %v, want dockerd's \"GA==\"", got["DetachKeys"])
	}
	if _, ok := got["ProcessConfig"].(map[string]any)["user"]; ok {
		t.Errorf("ProcessConfig of an exec without a user: %v, want no \"user\"", got["ProcessConfig"])
	}
	if got := inspect(`{"Cmd":["true"]}`); got["DetachKeys"] != "" {
		t.Errorf("DetachKeys where none were given: %v, want \"\"", got["DetachKeys"])
	}
	if status, _, body := te.Exchange("GET", base+"/exec/nosuchexec/json", "", nil); status != 404 || !strings.Contains(string(body), `"No such exec instance: nosuchexec"`) {
		t.Errorf("inspect of a missing exec: %d %s", status, body)
	}
	te.run("docker", "pause", "execinsp")
	contains(t, "exec in a paused container", te.fails("docker", "exec", "execinsp", "true"),
		"Container execinsp is paused, unpause the container before exec")
	te.run("docker", "unpause", "execinsp")
	te.run("docker", "kill", "execinsp")
	contains(t, "exec in a stopped container", te.fails("docker", "exec", "execinsp", "true"), "Error response from daemon: Container ")
}
