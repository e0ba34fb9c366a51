package podsapi

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPodMemberStorage: a pod's volumes, bind mounts and devices (podman
// pod create -v, --device) are every member's, before its own, as Podman's
// members inherit them from the infra container: two members share the
// named volume, the bind mount is read-only as asked, the device is there;
// a member naming the same destination again is a 400; pod inspect shows
// them; a pod whose mount is bad is refused whole.
func TestPodMemberStorage(t *testing.T) {
	te := startEngine(t)
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "f"), []byte("from-host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	te.MustPodman("pod", "create", "--name", "stored", "-v", "podvol:/data", "-v", host+":/host:ro", "--device", "/dev/null:/dev/podnull")
	out := te.MustPodman("run", "--rm", "--pod", "stored", "localhost/busybox:latest", "sh", "-c",
		"echo shared > /data/x && cat /host/f && ls /dev/podnull && (touch /host/y 2>/dev/null || echo host-read-only)")
	for _, want := range []string{"from-host", "/dev/podnull", "host-read-only"} {
		if !strings.Contains(out, want) {
			t.Errorf("a member of the pod: output lacks %q:\n%s", want, out)
		}
	}
	if out := te.MustPodman("run", "--rm", "--pod", "stored", "-v", "own:/own", "localhost/busybox:latest", "sh", "-c", "cat /data/x && ls -d /own"); !strings.Contains(out, "shared") || !strings.Contains(out, "/own") {
		t.Errorf("a second member with a volume of its own:\n%s", out)
	}
	if out, err := te.Podman("run", "--rm", "--pod", "stored", "-v", "other:/data", "localhost/busybox:latest", "true"); err == nil || !strings.Contains(out, "duplicate mount destination /data") {
		t.Errorf("a member naming the pod's destination again: %v\n%s", err, out)
	}
	out = te.MustPodman("pod", "inspect", "stored", "--format", "{{range .Mounts}}{{.Type}} {{.Destination}} {{.RW}};{{end}} {{range .Devices}}{{.PathOnHost}}>{{.PathInContainer}}{{end}}")
	for _, want := range []string{"volume /data true", "bind /host false", "/dev/null>/dev/podnull"} {
		if !strings.Contains(out, want) {
			t.Errorf("pod inspect lacks %q: %s", want, out)
		}
	}

	status, body := te.Do("POST", "/pods/create", map[string]any{"name": "badmount",
		"mounts": []map[string]any{{"destination": "relative", "type": "bind", "source": host}}})
	if status != http.StatusBadRequest || !strings.Contains(string(body), "mounts[0]") {
		t.Errorf("a pod with a relative mount destination: %d %s", status, body)
	}
	te.Must(http.StatusNotFound, "GET", "/pods/badmount/json", nil)

	// -v SRC:DST:O on a pod (overlay_volumes, refused before): each member
	// sees SRC through an overlay of its own and SRC stays as it was.
	te.MustPodman("pod", "create", "--name", "layered", "-v", host+":/o:O")
	out = te.MustPodman("run", "--rm", "--pod", "layered", "localhost/busybox:latest", "sh", "-c", "cat /o/f; echo changed > /o/f; cat /o/f")
	if !strings.Contains(out, "from-host") || !strings.Contains(out, "changed") {
		t.Errorf("a member of a pod with an overlay: %s", out)
	}
	if data, _ := os.ReadFile(filepath.Join(host, "f")); string(data) != "from-host\n" {
		t.Errorf("the pod's overlay source after a member wrote: %q", data)
	}
	status, body = te.Do("POST", "/pods/create", map[string]any{"name": "badoverlay",
		"overlay_volumes": []map[string]any{{"destination": "/o", "source": "relative", "options": []string{"O"}}}})
	if status != http.StatusBadRequest || !strings.Contains(string(body), "overlay_volumes[0].source") {
		t.Errorf("a pod overlay with a relative source: %d %s", status, body)
	}
}

// TestPodSysctl: a pod's sysctls (podman pod create --sysctl) are set in
// the namespaces its members share (by the engine's own pause process,
// which the infra container stays), so a member reads them; a pod without
// an infra container has no namespace to set them in: a 400.
func TestPodSysctl(t *testing.T) {
	te := startEngine(t)
	te.MustPodman("pod", "create", "--name", "tuned", "--sysctl", "net.core.somaxconn=1234", "--sysctl", "kernel.msgmax=9000")
	out := te.MustPodman("run", "--rm", "--pod", "tuned", "localhost/busybox:latest", "cat", "/proc/sys/net/core/somaxconn", "/proc/sys/kernel/msgmax")
	if strings.Fields(out)[0] != "1234" || !strings.Contains(out, "9000") {
		t.Errorf("a member reads %q, want 1234 and 9000", out)
	}
	infra := te.inspectPod("tuned").InfraContainerID
	if _, err := os.Stat(filepath.Join(te.RunRoot, "pause", infra, "state.json")); err != nil {
		t.Errorf("the infra container is not the engine's pause process: %v", err)
	}
	// (podman's client drops --sysctl itself with --infra=false.)
	status, body := te.Do("POST", "/pods/create", map[string]any{"name": "untuned", "no_infra": true, "sysctl": map[string]string{"net.core.somaxconn": "1234"}})
	if status != http.StatusBadRequest || !strings.Contains(string(body), "sysctl") {
		t.Errorf("sysctls on a pod without an infra container: %d %s", status, body)
	}
}

// TestPodVolumesFrom: a pod's --volumes-from is every member's: each mounts
// what the named container holds; a container that does not exist is a 404
// naming it when the pod is made (as for a container's --volumes-from).
func TestPodVolumesFrom(t *testing.T) {
	te := startEngine(t)
	te.MustPodman("create", "--name", "holder", "-v", "held:/held", "localhost/busybox:latest", "true")
	te.MustPodman("run", "--rm", "--volumes-from", "holder", "localhost/busybox:latest", "sh", "-c", "echo kept > /held/f")
	te.MustPodman("pod", "create", "--name", "borrowing", "--volumes-from", "holder:ro")
	out := te.MustPodman("run", "--rm", "--pod", "borrowing", "localhost/busybox:latest", "sh", "-c", "cat /held/f; touch /held/g 2>/dev/null || echo read-only")
	if !strings.Contains(out, "kept") || !strings.Contains(out, "read-only") {
		t.Errorf("a member of a pod with --volumes-from holder:ro:\n%s", out)
	}
	status, body := te.Do("POST", "/pods/create", map[string]any{"name": "lending", "volumes_from": []string{"nosuchcontainer"}})
	if status != http.StatusNotFound || !strings.Contains(string(body), "volumes_from[0]") || !strings.Contains(string(body), "nosuchcontainer") {
		t.Errorf("volumes_from of a missing container: %d %s", status, body)
	}
	te.Must(http.StatusNotFound, "GET", "/pods/lending/json", nil)
}

// TestPodSecurityOpt: a pod's --security-opt is the confinement of every
// member that asks for none of its own (as Podman's members inherit the
// infra container's): no-new-privileges and seccomp=unconfined reach the
// member's process; a member's own profile wins; an option a pod cannot
// pass on is a 400 naming it.
func TestPodSecurityOpt(t *testing.T) {
	te := startEngine(t)
	te.MustPodman("pod", "create", "--name", "confined", "--security-opt", "no-new-privileges", "--security-opt", "seccomp=unconfined")
	status := func(args ...string) string {
		out := te.MustPodman(append([]string{"run", "--rm", "--pod", "confined"}, append(args, "localhost/busybox:latest", "grep", "-E", "^(NoNewPrivs|Seccomp):", "/proc/self/status")...)...)
		return strings.Join(strings.Fields(out), " ")
	}
	if got := status(); got != "NoNewPrivs: 1 Seccomp: 0" {
		t.Errorf("a member of the confined pod: %q, want no_new_privs and no filter", got)
	}
	profile := filepath.Join(t.TempDir(), "allow.json")
	if err := os.WriteFile(profile, []byte(`{"defaultAction":"SCMP_ACT_ALLOW"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := status("--security-opt", "seccomp="+profile); got != "NoNewPrivs: 1 Seccomp: 2" {
		t.Errorf("a member with a profile of its own: %q, want its filter (Seccomp: 2)", got)
	}
	status2, body := te.Do("POST", "/pods/create", map[string]any{"name": "masked", "security_opt": []string{"mask=/proc/x"}})
	if status2 != http.StatusBadRequest || !strings.Contains(string(body), "security_opt[0]") {
		t.Errorf("a pod security option it cannot pass on: %d %s", status2, body)
	}
}
