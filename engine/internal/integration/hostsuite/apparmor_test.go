package hostsuite

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/platform/apparmor"
	"github.com/berth-project/berth/engine/internal/testsupport/poll"
	"github.com/berth-project/berth/engine/internal/testsupport/tartest"
)

// requireAppArmor skips unless the kernel enforces AppArmor (the host lab's
// Debian 12 kernel does, and there its absence is a failure).
func requireAppArmor(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile("/sys/module/apparmor/parameters/enabled")
	if err == nil && strings.TrimSpace(string(data)) == "Y" {
		if _, err := exec.LookPath("apparmor_parser"); err == nil {
			return
		}
	}
	// The host lab's kernel enforces AppArmor: there a skip would hide a
	// broken image. Elsewhere (the development machines have no AppArmor)
	// it is the host that lacks it, strict or not.
	if os.Getenv("BERTH_HOSTLAB") == "1" {
		t.Fatal("AppArmor is not enforced in the host lab or apparmor_parser is missing")
	}
	t.Skip("needs a kernel that enforces AppArmor and apparmor_parser")
}

// TestAppArmorEnforced: where the kernel enforces AppArmor, a default
// container runs under berth-default (its /proc/self/attr/current says
// so) and the profile refuses what it denies even where capabilities,
// seccomp and the read-only kernel paths are lifted (mount with
// CAP_SYS_ADMIN and seccomp=unconfined; a write to /proc/sysrq-trigger with
// unmask=ALL); apparmor=unconfined lifts it; a profile loaded by the
// administrator applies by name; a name that is not loaded is a 400 naming
// it, with nothing created.
func TestAppArmorEnforced(t *testing.T) {
	requireAppArmor(t)
	l := startLab(t)
	out := t.TempDir()
	os.Chmod(out, 0o777)
	bind := []map[string]any{{"destination": "/out", "source": out, "type": "bind"}}
	// probe runs script with the security options; it writes the
	// container's AppArmor label to /out/NAME and answers the exit code.
	probe := func(name, script string, extra map[string]any) (int, string) {
		t.Helper()
		spec := map[string]any{"name": name, "mounts": bind, "netns": map[string]string{"nsmode": "none"},
			"command": []string{"sh", "-c", "cat /proc/self/attr/current > /out/" + name + "; " + script}}
		for k, v := range extra {
			spec[k] = v
		}
		code := l.Wait(l.Run(spec))
		label, _ := os.ReadFile(filepath.Join(out, name))
		return code, strings.TrimSpace(string(label))
	}
	// What only AppArmor still refuses here: a tmpfs mount with the
	// capability and without the filter, and a sysrq write ("h": the help,
	// harmless) with the kernel paths unmasked.
	const (
		mountScript = "mkdir -p /mnt/t && mount -t tmpfs none /mnt/t"
		sysrqScript = "echo h > /proc/sysrq-trigger"
	)
	lifted := map[string]any{"cap_add": []string{"SYS_ADMIN"}, "seccomp_profile_path": "unconfined", "unmask": []string{"ALL"}}

	code, label := probe("aa-default", "true", nil)
	if code != 0 || label != "berth-default (enforce)" {
		t.Fatalf("default container: exit %d, label %q, want berth-default (enforce)", code, label)
	}
	var insp struct{ AppArmorProfile string }
	l.Get("/containers/aa-default/json", &insp)
	if insp.AppArmorProfile != "berth-default" {
		t.Errorf("inspect AppArmorProfile %q, want berth-default", insp.AppArmorProfile)
	}
	if code, _ := probe("aa-mount", mountScript, lifted); code == 0 {
		t.Error("berth-default: a tmpfs mount succeeded (CAP_SYS_ADMIN, seccomp=unconfined); the profile denies mount")
	}
	if code, _ := probe("aa-sysrq", sysrqScript, lifted); code == 0 {
		t.Error("berth-default: a write to /proc/sysrq-trigger succeeded (unmask=ALL); the profile denies it")
	}

	unconfined := map[string]any{"apparmor_profile": "unconfined"}
	for k, v := range lifted {
		unconfined[k] = v
	}
	if code, label := probe("aa-open-mount", mountScript, unconfined); code != 0 || label != "unconfined" {
		t.Errorf("apparmor=unconfined: mount exit %d, label %q; want 0 and unconfined (the same mount is refused only by the profile)", code, label)
	}
	if code, _ := probe("aa-open-sysrq", sysrqScript, unconfined); code != 0 {
		t.Errorf("apparmor=unconfined: the sysrq write exited %d, want 0", code)
	}

	// A profile of the administrator's, loaded with apparmor_parser.
	const custom = "berth-hostlab-custom"
	profile := filepath.Join(t.TempDir(), custom)
	text := "#include <tunables/global>\nprofile " + custom + " flags=(attach_disconnected,mediate_deleted) {\n" +
		"  #include <abstractions/base>\n  file,\n  capability,\n  network,\n  deny /tmp/** w,\n}\n"
	if err := os.WriteFile(profile, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	parser := func(args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "apparmor_parser", args...).CombinedOutput(); err != nil {
			t.Fatalf("apparmor_parser %v: %v\n%s", args, err, out)
		}
	}
	parser("-r", "-K", profile)
	t.Cleanup(func() { exec.Command("apparmor_parser", "-R", profile).Run() })
	code, label = probe("aa-custom", "touch /tmp/x", map[string]any{"apparmor_profile": custom})
	if label != custom+" (enforce)" || code == 0 {
		t.Errorf("apparmor=%s: label %q, touch /tmp/x exit %d; want the profile and the write refused", custom, label, code)
	}
	if code, _ := probe("aa-custom-ok", "touch /x", map[string]any{"apparmor_profile": custom}); code != 0 {
		t.Errorf("apparmor=%s: a write the profile allows exited %d", custom, code)
	}

	// A build RUN step runs under berth-default too: the step fails (and
	// no image is made) unless its label says so.
	buildCtx := tartest.Of(t, "Containerfile", "FROM localhost/busybox:latest\nRUN cat /proc/self/attr/current && grep -q '^berth-default (enforce)' /proc/self/attr/current\n")
	t.Cleanup(func() { l.Do("DELETE", "/images/localhost/aa-build:latest?force=true", nil) })
	bstatus, bbody := l.Do("POST", "/build?t=localhost/aa-build:latest", bytes.NewReader(buildCtx))
	if st, _ := l.Do("GET", "/images/localhost/aa-build:latest/exists", nil); st != http.StatusNoContent {
		t.Errorf("a build whose RUN step checks for berth-default made no image: %d\n%s", bstatus, bbody)
	}

	// A profile that is not loaded: 400 naming it, nothing created.
	status, body := l.Do("POST", "/containers/create", map[string]any{"name": "aa-missing", "image": "localhost/busybox:latest",
		"command": []string{"true"}, "apparmor_profile": "berth-no-such-profile"})
	if status != http.StatusBadRequest || !strings.Contains(string(body), "apparmor_profile") || !strings.Contains(string(body), "berth-no-such-profile") {
		t.Errorf("a profile that is not loaded: %d %s, want a 400 naming apparmor_profile and the profile", status, body)
	}
	if status, _ := l.Do("GET", "/containers/aa-missing/json", nil); status != http.StatusNotFound {
		t.Errorf("inspect after a refused create: %d, want 404", status)
	}
}

// TestAppArmorLetsTheRuntimesSignal: a process under each OCI runtime's
// label (apparmor.RuntimeLabels) can signal a berth-default container.
// Debian 13's AppArmor 4 labels runc "runc", and CRIU, which runc starts,
// inherits it: when berth-default took signals from unconfined processes
// only, CRIU's SIGKILL at the end of a checkpoint was denied and the dump
// waited for ever (TestCheckpointInHostLab hung there). Where the host has
// no profile of that name (Debian 12), a permissive one without an
// attachment is loaded for the test: a label, as the host's would be.
func TestAppArmorLetsTheRuntimesSignal(t *testing.T) {
	requireAppArmor(t)
	l := startLab(t)
	for _, label := range apparmor.RuntimeLabels {
		t.Run(label, func(t *testing.T) {
			if !apparmorLoaded(t, label) {
				profile := filepath.Join(t.TempDir(), label)
				text := "profile " + label + " {\n  file,\n  signal,\n  capability,\n}\n"
				if err := os.WriteFile(profile, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				if out, err := exec.CommandContext(ctx, "apparmor_parser", "-r", "-K", profile).CombinedOutput(); err != nil {
					t.Fatalf("apparmor_parser -r %s: %v\n%s", profile, err, out)
				}
				t.Cleanup(func() { exec.Command("apparmor_parser", "-R", profile).Run() })
				t.Logf("no profile %s on this host: a throwaway one loaded", label)
			}
			id := l.Run(map[string]any{"name": "aa-signal-" + label, "netns": map[string]string{"nsmode": "none"},
				"command": []string{"sh", "-c", "trap 'exit 7' USR1; while true; do sleep 0.1; done"}})
			pid := l.inspect(id).State.Pid
			// Until the shell has set its trap, the namespace's init
			// drops USR1: sent again until the container ends.
			poll.Until(t, 60*time.Second, "the container ends on the USR1 sent under "+label, func() bool {
				if !l.inspect(id).State.Running {
					return true
				}
				out, err := exec.Command("aa-exec", "-p", label, "--", "kill", "-USR1", strconv.Itoa(pid)).CombinedOutput()
				if err != nil && l.inspect(id).State.Running {
					t.Fatalf("kill -USR1 %d under the label %s: %v: %s (berth-default must take signals from the runtimes)", pid, label, err, out)
				}
				time.Sleep(200 * time.Millisecond)
				return false
			})
			if code := l.Wait(id); code != 7 {
				t.Fatalf("the container exited %d, want 7 (its USR1 trap)", code)
			}
		})
	}
}

// apparmorLoaded tells whether a profile of that name is loaded.
func apparmorLoaded(t *testing.T, name string) bool {
	t.Helper()
	data, err := os.ReadFile("/sys/kernel/security/apparmor/profiles")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if n, _, _ := strings.Cut(line, " ("); n == name {
			return true
		}
	}
	return false
}
