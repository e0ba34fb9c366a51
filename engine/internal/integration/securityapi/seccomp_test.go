package securityapi

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
)

// seccompMode is the Seccomp line of /proc/self/status: 0 none, 2 filter.
func seccompMode(out string) string {
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "Seccomp:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// TestSeccompByDefault: a default container, its exec sessions and a build's
// RUN steps run under the default filter; unconfined and privileged
// containers run without one; info and inspect say which applies.
func TestSeccompByDefault(t *testing.T) {
	te := startEngine(t)
	te.Load(busybox)

	sec := te.hostSecurity()
	if !sec.SeccompEnabled || sec.SeccompProfilePath == "" {
		t.Fatalf("info: seccompEnabled %v, seccompProfilePath %q", sec.SeccompEnabled, sec.SeccompProfilePath)
	}
	// The file info names is the profile: Docker's, which refuses keyctl.
	data, err := os.ReadFile(sec.SeccompProfilePath)
	if err != nil || !strings.Contains(string(data), `"SCMP_ACT_ERRNO"`) || strings.Contains(string(data), `"keyctl"`) {
		t.Fatalf("default profile at %s: %v, %.200s", sec.SeccompProfilePath, err, data)
	}

	if m := seccompMode(te.MustPodman("run", "--rm", "localhost/busybox", "cat", "/proc/self/status")); m != "2" {
		t.Errorf("default container: Seccomp %s, want 2 (filter)", m)
	}
	te.MustPodman("run", "-d", "--name", "filtered", "localhost/busybox", "sleep", "60")
	if m := seccompMode(te.MustPodman("exec", "filtered", "cat", "/proc/self/status")); m != "2" {
		t.Errorf("exec in a default container: Seccomp %s, want 2", m)
	}
	ins := te.inspect("filtered")
	if ins["SeccompProfilePath"] != sec.SeccompProfilePath {
		t.Errorf("inspect SeccompProfilePath %v, want %s", ins["SeccompProfilePath"], sec.SeccompProfilePath)
	}

	if m := seccompMode(te.MustPodman("run", "--rm", "--security-opt", "seccomp=unconfined", "localhost/busybox", "cat", "/proc/self/status")); m != "0" {
		t.Errorf("seccomp=unconfined: Seccomp %s, want 0", m)
	}
	if m := seccompMode(te.MustPodman("run", "--rm", "--privileged", "localhost/busybox", "cat", "/proc/self/status")); m != "0" {
		t.Errorf("--privileged: Seccomp %s, want 0", m)
	}
	te.MustPodman("create", "--name", "open", "--security-opt", "seccomp=unconfined", "--security-opt", "no-new-privileges", "localhost/busybox", "true")
	ins = te.inspect("open")
	opts, _ := json.Marshal(ins["HostConfig"].(map[string]any)["SecurityOpt"])
	if ins["SeccompProfilePath"] != "unconfined" || !strings.Contains(string(opts), `"seccomp=unconfined"`) || !strings.Contains(string(opts), `"no-new-privileges"`) {
		t.Errorf("inspect of an unconfined container: SeccompProfilePath %v, SecurityOpt %s", ins["SeccompProfilePath"], opts)
	}

	// A build's RUN steps: the step fails unless the filter is as asked.
	dir := t.TempDir()
	os.WriteFile(dir+"/Containerfile", []byte("FROM localhost/busybox\nRUN grep -q '^Seccomp:.*2' /proc/self/status\n"), 0o644)
	te.MustPodman("build", "-t", "localhost/filtered-build", dir)
	os.WriteFile(dir+"/Containerfile", []byte("FROM localhost/busybox\nRUN grep -q '^Seccomp:.*0' /proc/self/status\n"), 0o644)
	te.MustPodman("build", "--security-opt", "seccomp=unconfined", "-t", "localhost/open-build", dir)
}

// TestSeccompCustomProfile: a profile file of the client's own is applied
// (here: mkdir refused), and kept with the container when the file goes.
func TestSeccompCustomProfile(t *testing.T) {
	te := startEngine(t)
	te.Load(busybox)
	profile := te.writeFile("nomkdir.json", `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir","mkdirat"],"action":"SCMP_ACT_ERRNO"}]}`)
	out, err := te.Podman("run", "--rm", "--security-opt", "seccomp="+profile, "localhost/busybox", "mkdir", "/made")
	if err == nil || !strings.Contains(out, "Operation not permitted") {
		t.Fatalf("mkdir under a profile refusing it: %v\n%s", err, out)
	}
	te.MustPodman("create", "--name", "custom", "--security-opt", "seccomp="+profile, "localhost/busybox", "mkdir", "/made")
	os.Remove(profile)
	if out, err := te.Podman("start", "--attach", "custom"); err == nil || !strings.Contains(out, "Operation not permitted") {
		t.Fatalf("start after the profile file went: %v\n%s", err, out)
	}
	if got := te.inspect("custom")["SeccompProfilePath"]; got != profile {
		t.Errorf("inspect SeccompProfilePath %v, want %s", got, profile)
	}
	// seccomp_policy=image takes the image's label.
	te.Load(testImageWithLabel("localhost/labelled:latest", map[string]string{
		"io.containers.seccomp.profile": `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir","mkdirat"],"action":"SCMP_ACT_ERRNO"}]}`,
	}))
	out, err = te.Podman("run", "--rm", "--seccomp-policy", "image", "localhost/labelled", "mkdir", "/made")
	if err == nil || !strings.Contains(out, "Operation not permitted") {
		t.Fatalf("seccomp-policy=image: %v\n%s", err, out)
	}
	te.MustPodman("run", "--rm", "localhost/labelled", "mkdir", "/made")
}

// TestSeccompBadProfile: a profile that is not JSON, names an unknown action
// or is missing is a 400 naming the file and the member; nothing is created.
func TestSeccompBadProfile(t *testing.T) {
	te := startEngine(t)
	te.Load(busybox)
	for _, tc := range []struct {
		name, content string
		want          []string
	}{
		{"notjson.json", "{\"defaultAction\": SCMP_ACT_ALLOW}", []string{"not a JSON profile", "line 1, column 19"}},
		{"badaction.json", `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir"],"action":"SCMP_ACT_ALLOW"},{"names":["rmdir"],"action":"SCMP_ACT_NOPE"}]}`,
			[]string{"syscalls[1].action", `unknown action "SCMP_ACT_NOPE"`}},
		{"baddefault.json", `{"defaultAction":"ALLOW"}`, []string{"defaultAction", `unknown action "ALLOW"`}},
		{"badop.json", `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["personality"],"action":"SCMP_ACT_ERRNO","args":[{"index":0,"value":1,"op":"EQ"}]}]}`,
			[]string{"syscalls[0].args[0].op"}},
	} {
		path := te.writeFile(tc.name, tc.content)
		status, body := te.Do("POST", "/containers/create", map[string]any{"image": "localhost/busybox", "command": []string{"true"}, "seccomp_profile_path": path})
		if status != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400: %s", tc.name, status, body)
			continue
		}
		var e struct{ Message string }
		json.Unmarshal(body, &e)
		for _, want := range append([]string{"seccomp_profile_path", path}, tc.want...) {
			if !strings.Contains(e.Message, want) {
				t.Errorf("%s: the error does not say %q: %s", tc.name, want, e.Message)
			}
		}
	}
	out, err := te.Podman("run", "--rm", "--security-opt", "seccomp="+te.Dir+"/missing.json", "localhost/busybox", "true")
	if err == nil || !strings.Contains(out, "missing.json") {
		t.Errorf("a missing profile: %v\n%s", err, out)
	}
	status, body := te.Do("POST", "/containers/create", map[string]any{"image": "localhost/busybox", "seccomp_policy": "strict"})
	if status != http.StatusBadRequest || !strings.Contains(string(body), "seccomp_policy") {
		t.Errorf("seccomp_policy strict: %d %s", status, body)
	}
	if n := te.ContainerCount(); n != 0 {
		t.Errorf("%d containers after refused creates, want 0", n)
	}
}
