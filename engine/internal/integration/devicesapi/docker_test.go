package devicesapi

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
)

// docker runs the docker CLI (Debian's docker.io) against the engine's
// Docker API.
func (te *testEngine) docker(args ...string) (string, error) {
	te.T.Helper()
	config := filepath.Join(te.Dir, "docker-config")
	if err := os.MkdirAll(config, 0o700); err != nil {
		te.T.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Env = append(os.Environ(), "DOCKER_HOST=tcp://"+te.Addr, "DOCKER_CONFIG="+config, "DOCKER_CLI_HINTS=false")
	cmd.Dir = te.Dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// gpuSpec is a stand-in for the spec nvidia-ctk writes on a GPU host: two
// "GPUs" of kind nvidia.com/gpu (the host's /dev/null and /dev/zero as
// /dev/nvidia0 and /dev/nvidia1), an "all" device with both, and an
// environment variable every device brings.
const gpuSpec = `cdiVersion: "0.6.0"
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes: [{path: /dev/nvidia0, hostPath: /dev/null}]
- name: "1"
  containerEdits:
    deviceNodes: [{path: /dev/nvidia1, hostPath: /dev/zero}]
- name: all
  containerEdits:
    deviceNodes:
    - {path: /dev/nvidia0, hostPath: /dev/null}
    - {path: /dev/nvidia1, hostPath: /dev/zero}
containerEdits:
  env: [NVIDIA_VISIBLE_DEVICES=void]
`

// TestDockerGPUsThroughCDI: the Docker API maps docker run --gpus (all, a
// count, device IDs) and --device vendor/class=name to CDI devices, and
// --device-cgroup-rule to a rule; a GPU the specs lack and an invalid rule
// are refused.
func TestDockerGPUsThroughCDI(t *testing.T) {
	te := startEngine(t)
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("the docker CLI is not installed")
	}
	te.writeSpec("nvidia.yaml", gpuSpec)
	status, body := enginetest.Do(t, te.Client, "GET", te.Base(), "/v1.44/info", nil)
	if status != http.StatusOK || !strings.Contains(string(body), te.cdiDir) || !strings.Contains(string(body), `{"Source":"cdi","ID":"nvidia.com/gpu=1"}`) {
		t.Errorf("Docker info's CDISpecDirs and DiscoveredDevices: %d %s", status, body)
	}
	probe := []string{"localhost/busybox:latest", "sh", "-c", "ls /dev/nvidia0 /dev/nvidia1 2>&1; echo vis=$NVIDIA_VISIBLE_DEVICES"}
	for _, tc := range []struct {
		args      []string
		has, lack []string
	}{
		{[]string{"--gpus", "all"}, []string{"/dev/nvidia0", "/dev/nvidia1", "vis=void"}, []string{"No such file"}},
		{[]string{"--gpus", "1"}, []string{"/dev/nvidia0", "/dev/nvidia1: No such file", "vis=void"}, nil},
		{[]string{"--gpus", `"device=1"`}, []string{"/dev/nvidia0: No such file", "/dev/nvidia1", "vis=void"}, nil},
		{[]string{"--device", "nvidia.com/gpu=0"}, []string{"/dev/nvidia1: No such file", "vis=void"}, nil},
	} {
		out, err := te.docker(append(append([]string{"run", "--rm"}, tc.args...), probe...)...)
		if err != nil {
			t.Errorf("docker run %v: %v\n%s", tc.args, err, out)
			continue
		}
		checkOutput(t, fmt.Sprintf("docker run %v", tc.args), out, tc.has, tc.lack)
	}
	if out, err := te.docker("run", "--rm", "--gpus", "3", "localhost/busybox:latest", "true"); err == nil || !strings.Contains(out, `unknown CDI device "nvidia.com/gpu=2"`) {
		t.Errorf("docker run --gpus 3 with two GPUs: err %v\n%s", err, out)
	}
	out, err := te.docker("run", "--name", "ruled", "--cap-add", "MKNOD", "--device-cgroup-rule", "c 10:229 rw", "localhost/busybox:latest",
		"sh", "-c", "mknod /dev/xfuse c 10 229 && : < /dev/xfuse && echo opened")
	if err != nil || !strings.Contains(out, "opened") {
		t.Errorf("docker run --device-cgroup-rule: %v\n%s", err, out)
	}
	if out, _ := te.docker("inspect", "--format", "{{.HostConfig.DeviceCgroupRules}}", "ruled"); strings.TrimSpace(out) != "[c 10:229 rw]" {
		t.Errorf("docker inspect DeviceCgroupRules: %s", out)
	}
	// The docker CLI checks a rule's syntax itself; the API checks what reaches it.
	status, body = enginetest.Do(t, te.Client, "POST", te.Base(), "/v1.44/containers/create", map[string]any{
		"Image": "localhost/busybox:latest", "HostConfig": map[string]any{"DeviceCgroupRules": []string{"c 10:229 rwx"}},
	})
	if status != http.StatusBadRequest || !strings.Contains(string(body), "DeviceCgroupRules[0]") || !strings.Contains(string(body), "rwx") {
		t.Errorf("Docker create with an invalid rule: %d %s", status, body)
	}
	status, body = enginetest.Do(t, te.Client, "POST", te.Base(), "/v1.44/containers/create", map[string]any{
		"Image": "localhost/busybox:latest", "HostConfig": map[string]any{"DeviceRequests": []map[string]any{{"Driver": "amd", "Count": 1}}},
	})
	if status != http.StatusBadRequest || !strings.Contains(string(body), "DeviceRequests[0]") {
		t.Errorf("Docker create with a device request of another driver: %d %s", status, body)
	}
}

// checkOutput fails t unless out holds every text of has and none of lack.
func checkOutput(t *testing.T, what, out string, has, lack []string) {
	t.Helper()
	for _, want := range has {
		if !strings.Contains(out, want) {
			t.Errorf("%s: output lacks %q:\n%s", what, want, out)
		}
	}
	for _, not := range lack {
		if strings.Contains(out, not) {
			t.Errorf("%s: output has %q:\n%s", what, not, out)
		}
	}
}
