package devicesapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/cditest"
)

// exampleSpec is cditest's class mounting share, with a hook that records
// the container's state in hookOut.
func exampleSpec(share, hookOut string) string {
	return cditest.ExampleSpec(share, "/bin/sh", "sh", "-c", "cat > "+hookOut)
}

// setupExample writes the example spec and the directory it mounts.
func (te *testEngine) setupExample() (hookOut string) {
	te.T.Helper()
	share := filepath.Join(te.Dir, "share")
	if err := os.MkdirAll(share, 0o755); err != nil {
		te.T.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(share, "note.txt"), []byte("from the spec\n"), 0o644); err != nil {
		te.T.Fatal(err)
	}
	hookOut = filepath.Join(te.Dir, "hook-state.json")
	te.writeSpec("example.yaml", exampleSpec(share, hookOut))
	return hookOut
}

const probe = `ls -l /dev/xnull /dev/xzero 2>&1; echo "env=$EXAMPLE_DEV"; cat /opt/example/note.txt; head -c 3 /dev/xzero | od -An -c`

// TestPodmanRunCDIDevices: podman run --device example.com/dev=all gets
// every edit of the spec (both device nodes with the host's numbers, the
// environment, the mount, the hook); one device gets only its own node;
// exec in the container sees the same; a pod member and a build RUN step
// get them too; info lists the devices.
func TestPodmanRunCDIDevices(t *testing.T) {
	te := startEngine(t)
	hookOut := te.setupExample()

	out := te.mustPodman("run", "--rm", "--device", "example.com/dev=all", "localhost/busybox", "sh", "-c", probe)
	for _, want := range []string{"1,   3", "/dev/xnull", "1,   5", "/dev/xzero", "env=present", "from the spec", "\\0  \\0  \\0"} {
		if !strings.Contains(out, want) {
			t.Errorf("run --device example.com/dev=all: output lacks %q:\n%s", want, out)
		}
	}
	var state struct {
		ID     string `json:"id"`
		Bundle string `json:"bundle"`
	}
	data, err := os.ReadFile(hookOut)
	if err != nil || json.Unmarshal(data, &state) != nil || len(state.ID) != 64 {
		t.Errorf("the spec's createRuntime hook did not get the container's state: %v %s", err, data)
	}

	out = te.mustPodman("run", "--rm", "--device", "example.com/dev=null", "localhost/busybox", "sh", "-c", probe)
	if !strings.Contains(out, "/dev/xnull") || strings.Contains(out, "1,   5") || !strings.Contains(out, "env=present") {
		t.Errorf("run --device example.com/dev=null: want /dev/xnull and the class's edits only:\n%s", out)
	}

	te.mustPodman("run", "-d", "--name", "withdev", "--device", "example.com/dev=zero", "localhost/busybox", "sleep", "60")
	out = te.mustPodman("exec", "withdev", "sh", "-c", probe)
	if !strings.Contains(out, "1,   5") || !strings.Contains(out, "env=present") || !strings.Contains(out, "from the spec") {
		t.Errorf("exec in a container with a CDI device:\n%s", out)
	}

	te.mustPodman("pod", "create", "--name", "devpod")
	out = te.mustPodman("run", "--rm", "--pod", "devpod", "--device", "example.com/dev=zero", "localhost/busybox", "sh", "-c", probe)
	if !strings.Contains(out, "1,   5") || !strings.Contains(out, "env=present") {
		t.Errorf("pod member with a CDI device:\n%s", out)
	}

	ctx := filepath.Join(te.Dir, "ctx")
	os.MkdirAll(ctx, 0o755)
	os.WriteFile(filepath.Join(ctx, "Containerfile"), []byte("FROM localhost/busybox\nRUN ls -l /dev/xnull > /built && echo \"env=$EXAMPLE_DEV\" >> /built && cat /opt/example/note.txt >> /built\n"), 0o644)
	te.mustPodman("build", "--device", "example.com/dev=null", "-t", "localhost/cdibuild", ctx)
	out = te.mustPodman("run", "--rm", "localhost/cdibuild", "sh", "-c", "cat /built; ls -d /opt/example 2>&1; true")
	if !strings.Contains(out, "1,   3") || !strings.Contains(out, "env=present") || !strings.Contains(out, "from the spec") || !strings.Contains(out, "No such file") {
		t.Errorf("build RUN with a CDI device (the mount point must not stay in the layer):\n%s", out)
	}

	var info struct {
		Host struct {
			CDI struct {
				SpecDirs []string
				Devices  []struct{ Name, Spec string }
			} `json:"cdi"`
		} `json:"host"`
	}
	if err := json.Unmarshal(te.Must(http.StatusOK, "GET", "/info", nil), &info); err != nil {
		t.Fatal(err)
	}
	names := fmt.Sprint(info.Host.CDI.Devices)
	if !strings.Contains(names, "example.com/dev=null") || !strings.Contains(names, "example.com/dev=zero") ||
		!strings.Contains(fmt.Sprint(info.Host.CDI.SpecDirs), te.cdiDir) {
		t.Errorf("info's CDI devices: %+v", info.Host.CDI)
	}
}

// TestCDISpecChangesWithoutRestart: a spec written, changed or removed
// while the engine runs counts for the next container, and a container
// created earlier gets its devices' edits as they are at its next start.
func TestCDISpecChangesWithoutRestart(t *testing.T) {
	te := startEngine(t)
	if out, err := te.podman("run", "--rm", "--device", "example.com/dev=zero", "localhost/busybox", "true"); err == nil {
		t.Fatalf("a device no spec defines yet was given:\n%s", out)
	}
	te.setupExample()
	te.mustPodman("create", "--name", "early", "--device", "example.com/dev=zero", "localhost/busybox", "sh", "-c", "echo env=$EXAMPLE_DEV")
	te.mustPodman("start", "-a", "early")

	spec, _ := os.ReadFile(filepath.Join(te.cdiDir, "example.yaml"))
	changed := strings.Replace(string(spec), "EXAMPLE_DEV=present", "EXAMPLE_DEV=changed", 1)
	time.Sleep(10 * time.Millisecond) // a new modification time, whatever the file system's granularity
	te.writeSpec("example.yaml", changed)
	if out := te.mustPodman("run", "--rm", "--device", "example.com/dev=zero", "localhost/busybox", "sh", "-c", "echo env=$EXAMPLE_DEV"); !strings.Contains(out, "env=changed") {
		t.Errorf("a changed spec was not applied to a new container:\n%s", out)
	}
	if out := te.mustPodman("start", "-a", "early"); !strings.Contains(out, "env=changed") {
		t.Errorf("a changed spec was not applied at the next start of an existing container:\n%s", out)
	}

	te.writeSpec("more.json", `{"cdiVersion": "0.6.0", "kind": "example.com/more", "devices": [{"name": "n0", "containerEdits": {"env": ["MORE=1"]}}]}`)
	if out := te.mustPodman("run", "--rm", "--device", "example.com/more=n0", "localhost/busybox", "sh", "-c", "echo more=$MORE"); !strings.Contains(out, "more=1") {
		t.Errorf("a spec added while the engine runs:\n%s", out)
	}
	os.Remove(filepath.Join(te.cdiDir, "more.json"))
	if out, err := te.podman("run", "--rm", "--device", "example.com/more=n0", "localhost/busybox", "true"); err == nil || !strings.Contains(out, `unknown CDI device "example.com/more=n0"`) {
		t.Errorf("a removed spec's device: err %v\n%s", err, out)
	}
}

// TestCDIBadInput: a malformed spec is named with its file and field while
// the other specs are still served; an unknown device or a malformed name
// is a 400 naming it and creates nothing.
func TestCDIBadInput(t *testing.T) {
	te := startEngine(t)
	te.setupExample()
	te.writeSpec("broken.yaml", `cdiVersion: "0.6.0"
kind: broken.com/dev
devices:
- name: one
  containerEdits:
    mounts:
    - hostPath: /tmp
`)
	if out := te.mustPodman("run", "--rm", "--device", "example.com/dev=null", "localhost/busybox", "ls", "/dev/xnull"); !strings.Contains(out, "/dev/xnull") {
		t.Errorf("a good spec beside a broken one:\n%s", out)
	}
	out, err := te.podman("run", "--rm", "--device", "broken.com/dev=one", "localhost/busybox", "true")
	want := filepath.Join(te.cdiDir, "broken.yaml") + ": devices[0].containerEdits.mounts[0].containerPath: missing or empty"
	if err == nil || !strings.Contains(out, `unknown CDI device "broken.com/dev=one"`) || !strings.Contains(out, want) {
		t.Errorf("a device of a malformed spec: err %v, want the file and field named (%s):\n%s", err, want, out)
	}
	for _, dev := range []string{"example.com/dev=nope", "example.com/dev=bad name", "example.com=null"} {
		status, message, body := te.create(map[string]any{
			"image": "localhost/busybox", "command": []string{"true"},
			"devices": []map[string]string{{"path": "example.com/dev=null"}, {"path": dev}},
		})
		if status != http.StatusBadRequest || !strings.Contains(message, fmt.Sprintf("invalid devices: %q", dev)) && !strings.Contains(message, fmt.Sprintf("device %q", dev)) {
			t.Errorf("create with device %q: %d %s, want a 400 naming it", dev, status, body)
		}
	}
	if n := te.ContainerCount(); n != 0 {
		t.Errorf("the refused creates left %d containers", n)
	}
	var info struct {
		Host struct {
			CDI struct {
				Devices []struct{ Name string }
				Errors  []struct{ Spec, Error string }
			} `json:"cdi"`
		} `json:"host"`
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/info", nil), &info)
	if len(info.Host.CDI.Devices) != 2 || len(info.Host.CDI.Errors) != 1 || !strings.HasSuffix(info.Host.CDI.Errors[0].Spec, "broken.yaml") {
		t.Errorf("info: want the two good devices and the broken spec named: %+v", info.Host.CDI)
	}
}

// TestKubePlayCDILimit: kube play turns a limit of a CDI kind into that
// many devices of the kind; more than the specs offer is refused and plays
// nothing.
func TestKubePlayCDILimit(t *testing.T) {
	te := startEngine(t)
	te.setupExample()
	yaml := func(name string, n int) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: localhost/busybox:latest
    command: [sh, -c, "ls /dev/xnull /dev/xzero; echo env=$EXAMPLE_DEV; sleep 60"]
    resources:
      limits:
        example.com/dev: %d
`, name, n)
	}
	path := filepath.Join(te.Dir, "one.yaml")
	os.WriteFile(path, []byte(yaml("gpu-one", 1)), 0o644)
	te.mustPodman("kube", "play", path)
	deadline := time.Now().Add(10 * time.Second)
	var logs string
	for time.Now().Before(deadline) {
		logs, _ = te.podman("logs", "gpu-one-main")
		if strings.Contains(logs, "env=") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// One device: the first by name (null), not zero.
	if !strings.Contains(logs, "/dev/xnull") || !strings.Contains(logs, "/dev/xzero: No such file") || !strings.Contains(logs, "env=present") {
		t.Errorf("kube play with example.com/dev: 1:\n%s", logs)
	}

	path = filepath.Join(te.Dir, "three.yaml")
	os.WriteFile(path, []byte(yaml("gpu-three", 3)), 0o644)
	before := te.ContainerCount()
	out, err := te.podman("kube", "play", path)
	if err == nil || !strings.Contains(out, "example.com/dev") || !strings.Contains(out, "offer 2 devices") {
		t.Errorf("kube play asking for 3 of 2 devices: err %v\n%s", err, out)
	}
	if n := te.ContainerCount(); n != before {
		t.Errorf("the refused play left %d containers (had %d)", n, before)
	}
}
