package securityapi

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
)

// podInfra answers a pod's infra container ID.
func (te *testEngine) podInfra(pod string) string {
	te.T.Helper()
	var out struct{ InfraContainerID string }
	if err := json.Unmarshal(te.Must(http.StatusOK, "GET", "/pods/"+pod+"/json", nil), &out); err != nil || out.InfraContainerID == "" {
		te.T.Fatalf("pod %s: no infra container (%v)", pod, err)
	}
	return out.InfraContainerID
}

// userNSOf is the user namespace of a running container's process, as the
// host sees it (user:[INODE]).
func (te *testEngine) userNSOf(name string) string {
	te.T.Helper()
	pid := te.inspect(name)["State"].(map[string]any)["Pid"].(float64)
	ns, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(int(pid)), "ns", "user"))
	if err != nil {
		te.T.Fatal(err)
	}
	return ns
}

// TestPodUserNamespace: `pod create --userns=auto` (and --uidmap) gives the
// pod one user namespace, created by its infra container and joined by
// every member with the same mappings (a file a member's root writes into a
// bind mount is owned by the pod's mapped uid); the range is the pod's
// across a kill -9 of the engine, no other container gets it, and removing
// the pod frees it; a member cannot ask for its own; kube play's
// hostUsers: false gives the played pod one the same way.
func TestPodUserNamespace(t *testing.T) {
	p := enginetest.StartProcess(t, securityOptions())
	te := &testEngine{p.Engine}
	reachableFromUserns(p.Dir)
	te.Load(busybox)
	hostNS, _ := os.Readlink("/proc/self/ns/user")

	te.MustPodman("pod", "create", "--name", "upod", "--userns=auto:size=3000")
	infra := te.podInfra("upod")
	pod := te.idMaps(infra)
	if len(pod) != 1 || pod[0][0] != 0 || pod[0][2] != 3000 {
		t.Fatalf("infra container of a --userns=auto:size=3000 pod: uid maps %v", pod)
	}
	bind := filepath.Join(p.Dir, "podbind")
	os.Mkdir(bind, 0o777)
	os.Chmod(bind, 0o777)
	te.MustPodman("run", "-d", "--pod", "upod", "--name", "m1", "localhost/busybox", "sleep", "600")
	out := te.MustPodman("run", "--name", "m2", "--pod", "upod", "-v", bind+":/b", "localhost/busybox",
		"sh", "-c", "cat /proc/self/uid_map; touch /b/f")
	if f := strings.Fields(out); len(f) != 3 || f[0] != "0" || f[1] != strconv.FormatUint(pod[0][1], 10) || f[2] != "3000" {
		t.Fatalf("member's uid_map %q, want the pod's %v", out, pod)
	}
	fi, err := os.Stat(filepath.Join(bind, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; uint64(uid) != pod[0][1] {
		t.Errorf("file a member's root wrote into a bind mount: host owner %d, want the pod's mapped root %d", uid, pod[0][1])
	}
	for _, m := range []string{"m1", "m2"} {
		if got := te.idMaps(m); len(got) != 1 || got[0] != pod[0] {
			t.Errorf("member %s: uid maps %v, want the pod's %v", m, got, pod)
		}
	}
	if a, b := te.userNSOf(infra), te.userNSOf("m1"); a != b || a == hostNS {
		t.Errorf("user namespaces: infra %s, member %s, host %s: the member must join the infra container's", a, b, hostNS)
	}
	var podInfo struct {
		SharedNamespaces []string
		InfraConfig      struct{ UserNS string }
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/pods/upod/json", nil), &podInfo)
	if podInfo.InfraConfig.UserNS != "auto" || !strings.Contains(strings.Join(podInfo.SharedNamespaces, ","), "user") {
		t.Errorf("pod inspect: %+v", podInfo)
	}

	// A member cannot have a user namespace of its own; nothing is created.
	before := te.ContainerCount()
	// (podman's client refuses --userns with --pod itself: the request is sent directly)
	code, body := te.Do("POST", "/containers/create", map[string]any{"image": "localhost/busybox", "pod": "upod", "userns": map[string]string{"nsmode": "auto"}})
	if code != http.StatusBadRequest || !strings.Contains(string(body), "userns") {
		t.Errorf("member with its own userns: %d %s, want a 400 naming userns", code, body)
	}
	if n := te.ContainerCount(); n != before {
		t.Errorf("%d containers after a refused member, want %d", n, before)
	}

	// The range stays the pod's across a kill -9 of the engine.
	te.MustPodman("create", "--name", "other", "--userns=auto:size=3000", "localhost/busybox", "true")
	other := te.idMaps("other")
	p.Kill9()
	p.Start()
	if out := te.MustPodman("exec", "m1", "cat", "/proc/self/uid_map"); !strings.Contains(out, strconv.FormatUint(pod[0][1], 10)) {
		t.Errorf("member after the restart: uid_map %q", out)
	}
	te.MustPodman("create", "--name", "later", "--userns=auto:size=3000", "localhost/busybox", "true")
	later := te.idMaps("later")
	if overlaps(later, pod) || overlaps(later, other) || overlaps(other, pod) {
		t.Fatalf("pod %v, other %v, later %v: a range given twice", pod, other, later)
	}
	// Removing the pod frees its range (allocation is first fit: the next
	// container of the same size gets it back).
	te.MustPodman("pod", "rm", "-f", "upod")
	te.MustPodman("create", "--name", "reuse", "--userns=auto:size=3000", "localhost/busybox", "true")
	if reuse := te.idMaps("reuse"); !overlaps(reuse, pod) {
		t.Errorf("after the pod's removal a new container got %v, not the freed range %v (other %v, later %v)", reuse, pod, other, later)
	}

	// --uidmap/--gidmap on the pod: exactly those maps for every member.
	free := later[0][1] + later[0][2] + 100000
	m := strconv.FormatUint(free, 10)
	te.MustPodman("pod", "create", "--name", "mapped", "--uidmap", "0:"+m+":4096", "--gidmap", "0:"+m+":4096")
	out = te.MustPodman("run", "--rm", "--pod", "mapped", "localhost/busybox", "cat", "/proc/self/uid_map", "/proc/self/gid_map")
	if f := strings.Fields(out); len(f) != 6 || f[1] != m || f[2] != "4096" || f[4] != m {
		t.Errorf("member of a --uidmap 0:%s:4096 pod: %q", m, out)
	}
	te.MustPodman("pod", "rm", "-f", "mapped")

	// kube play: hostUsers: false.
	yaml := `apiVersion: v1
kind: Pod
metadata:
  name: kubens
spec:
  hostUsers: false
  containers:
  - name: c
    image: localhost/busybox
    command: ["sleep", "600"]
`
	file := filepath.Join(p.Dir, "kubens.yaml")
	os.WriteFile(file, []byte(yaml), 0o644)
	te.MustPodman("play", "kube", file)
	kinfra := te.idMaps(te.podInfra("kubens"))
	if kc := te.idMaps("kubens-c"); len(kinfra) != 1 || len(kc) != 1 || kc[0] != kinfra[0] || overlaps(kc, later) || overlaps(kc, other) {
		t.Errorf("kube play hostUsers: false: infra %v, container %v (later %v, other %v)", kinfra, kc, later, other)
	}
	if a, b := te.userNSOf(te.podInfra("kubens")), te.userNSOf("kubens-c"); a != b || a == hostNS {
		t.Errorf("kube play hostUsers: false: user namespaces infra %s, container %s, host %s", a, b, hostNS)
	}
	// Its bridge was set up in the network namespace the pod's user
	// namespace owns (created by runc inside it, then configured).
	if out := te.MustPodman("exec", "kubens-c", "cat", "/proc/net/dev"); !strings.Contains(out, "eth0:") {
		t.Errorf("kube play hostUsers: false: no eth0 in the pod's network namespace:\n%s", out)
	}
	te.MustPodman("play", "kube", "--down", file)
}
