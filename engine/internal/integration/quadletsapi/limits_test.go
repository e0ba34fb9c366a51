package quadletsapi

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestQuadletActivationLimits activates a .container with Memory=,
// PidsLimit=, ShmSize=, Ulimit=, StopSignal=, LogDriver=, GroupAdd=, UserNS=,
// Mount= (tmpfs and image) and Mask=, and reads each back from the running
// container.
func TestQuadletActivationLimits(t *testing.T) {
	te := startEngine(t)
	// The root of a user namespace reaches the engine's state below it.
	os.Chmod(te.Dir, 0o711)
	os.Chmod(filepath.Dir(te.Dir), 0o711)
	unit := "[Container]\nImage=localhost/busybox:latest\nContainerName=bqa-limits\nMemory=64m\nPidsLimit=50\nShmSize=1m\n" +
		"Ulimit=nofile=100:200\nStopSignal=SIGINT\nLogDriver=k8s-file\nLogOpt=max-size=8k\nGroupAdd=123\nMask=/opt\n" +
		"Mount=type=tmpfs,destination=/scratch,tmpfs-size=2m\nMount=type=image,source=localhost/busybox:latest,destination=/tools\n" +
		"UserNS=auto:size=2048\nStopTimeout=1\nExec=sleep 600\n"
	te.Must(http.StatusOK, "POST", "/quadlets?activate=true", tarOf(t, "bqa-limits.container", unit))
	defer te.Must(http.StatusOK, "DELETE", "/quadlets/bqa-limits.container?force=true", nil)
	var c struct {
		State      struct{ Pid int }
		Config     struct{ StopSignal any }
		HostConfig struct {
			Memory, PidsLimit, ShmSize int64
			Ulimits                    []struct {
				Name       string
				Soft, Hard int64
			}
			GroupAdd  []string
			LogConfig struct{ Type, Size string }
		}
		Mounts []struct{ Type, Destination string }
	}
	if err := json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/bqa-limits/json", nil), &c); err != nil {
		t.Fatal(err)
	}
	h := c.HostConfig
	if h.Memory != 64<<20 || h.PidsLimit != 50 || h.ShmSize != 1<<20 || len(h.GroupAdd) != 1 || h.GroupAdd[0] != "123" || h.LogConfig.Type != "k8s-file" {
		t.Errorf("HostConfig: %+v", h)
	}
	found := false
	for _, u := range h.Ulimits {
		found = found || (u.Name == "RLIMIT_NOFILE" && u.Soft == 100 && u.Hard == 200)
	}
	if !found {
		t.Errorf("Ulimits: %+v", h.Ulimits)
	}
	types := map[string]string{}
	for _, m := range c.Mounts {
		types[m.Destination] = m.Type
	}
	if types["/scratch"] != "tmpfs" || types["/tools"] != "image" {
		t.Errorf("Mounts: %+v", c.Mounts)
	}
	if data, err := os.ReadFile("/proc/" + strconv.Itoa(c.State.Pid) + "/root/tools/bin/busybox"); err != nil || len(data) == 0 {
		t.Errorf("the image mount in the container: %v", err)
	}
	if data, _ := os.ReadFile("/proc/" + strconv.Itoa(c.State.Pid) + "/uid_map"); len(strings.Fields(string(data))) != 3 || strings.Fields(string(data))[0] != "0" || strings.Fields(string(data))[1] == "0" || strings.Fields(string(data))[2] != "2048" {
		t.Errorf("UserNS=auto:size=2048: uid_map %q", data)
	}
	if data, _ := os.ReadFile("/proc/" + strconv.Itoa(c.State.Pid) + "/limits"); !strings.Contains(string(data), "Max open files            100                  200") {
		t.Errorf("the process's limits:\n%s", data)
	}
}
