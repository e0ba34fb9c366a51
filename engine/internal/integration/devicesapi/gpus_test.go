package devicesapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestLibpodGPUs: libpod's gpus member (Podman 5 and 6's --gpus) becomes
// the CDI devices VENDOR/gpu=ID of the first GPU vendor the specs offer,
// as Podman resolves it; without a GPU vendor's spec, and for a GPU the
// spec lacks or an ID that is no ID, the create is a 400 naming gpus or
// the device.
func TestLibpodGPUs(t *testing.T) {
	te := startEngine(t)
	create := func(gpus ...string) (int, string) {
		status, body := te.Do("POST", "/containers/create", map[string]any{"image": "localhost/busybox:latest", "gpus": gpus,
			"command": []string{"sh", "-c", "ls /dev/nvidia0 /dev/nvidia1 2>&1; echo vis=$NVIDIA_VISIBLE_DEVICES"}})
		return status, string(body)
	}
	if status, body := create("all"); status != http.StatusBadRequest || !strings.Contains(body, "gpus") || !strings.Contains(body, "nvidia.com, amd.com") {
		t.Errorf("gpus without a GPU vendor's spec: %d %s", status, body)
	}
	te.writeSpec("nvidia.yaml", gpuSpec)
	for _, tc := range []struct {
		gpus      []string
		has, lack []string
	}{
		{[]string{"all"}, []string{"/dev/nvidia0", "/dev/nvidia1", "vis=void"}, []string{"No such file"}},
		{[]string{"1"}, []string{"/dev/nvidia0: No such file", "/dev/nvidia1", "vis=void"}, nil},
		{[]string{"0", "1"}, []string{"/dev/nvidia0", "/dev/nvidia1"}, []string{"No such file"}},
	} {
		status, body := create(tc.gpus...)
		if status != http.StatusCreated {
			t.Errorf("gpus %v: %d %s", tc.gpus, status, body)
			continue
		}
		var created struct {
			ID string `json:"Id"`
		}
		if err := json.Unmarshal([]byte(body), &created); err != nil {
			t.Fatalf("create answer %s: %v", body, err)
		}
		id := created.ID
		te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
		te.Wait(id)
		checkOutput(t, fmt.Sprintf("gpus %v", tc.gpus), strings.Join(te.LogLines(id), "\n"), tc.has, tc.lack)
	}
	if status, body := create("7"); status != http.StatusBadRequest || !strings.Contains(body, `nvidia.com/gpu=7`) {
		t.Errorf("a GPU the spec lacks: %d %s", status, body)
	}
	if status, body := create("a/b=c"); status != http.StatusBadRequest || !strings.Contains(body, "gpus") {
		t.Errorf("a GPU ID that is no ID: %d %s", status, body)
	}
}
