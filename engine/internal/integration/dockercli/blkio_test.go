package dockercli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hostBlockDevice names a block device of the host and its major:minor,
// skipping the test where there is none.
func hostBlockDevice(t *testing.T) (path, numbers string) {
	t.Helper()
	entries, _ := os.ReadDir("/sys/block")
	for _, e := range entries {
		dev, err := os.ReadFile(filepath.Join("/sys/block", e.Name(), "dev"))
		if err != nil {
			continue
		}
		if _, err := os.Stat("/dev/" + e.Name()); err == nil && !strings.HasPrefix(e.Name(), "loop") {
			return "/dev/" + e.Name(), strings.TrimSpace(string(dev))
		}
	}
	t.Skip("the host has no block device node")
	return "", ""
}

// TestBlockIOThrottles: podman's --device-read-bps/--device-write-iops and
// docker's --device-read-bps reach the container's cgroup by device number
// and show in inspect by path; a path that is not a block device is refused
// naming the option.
func TestBlockIOThrottles(t *testing.T) {
	te := startEngine(t)
	dev, numbers := hostBlockDevice(t)
	read := "cat /sys/fs/cgroup/blkio/blkio.throttle.read_bps_device /sys/fs/cgroup/blkio/blkio.throttle.write_iops_device 2>/dev/null || cat /sys/fs/cgroup/io.max"
	out := te.run("podman", "run", "--rm", "--device-read-bps", dev+":1mb", "--device-write-iops", dev+":100", "localhost/busybox:latest", "sh", "-c", read)
	if !strings.Contains(out, numbers+" 1048576") && !strings.Contains(out, "rbps=1048576") || !strings.Contains(out, "100") {
		t.Fatalf("the container's throttles for %s (%s):\n%s", dev, numbers, out)
	}
	te.run("docker", "create", "--name", "throttled", "--device-read-bps", dev+":2mb", "localhost/busybox:latest", "true")
	for client, format := range map[string]string{"docker": "{{.HostConfig.BlkioDeviceReadBps}}", "podman": "{{.HostConfig.BlkioDeviceReadBps}}"} {
		got := te.run(client, "inspect", "--format", format, "throttled")
		if !strings.Contains(got, dev) || !strings.Contains(got, fmt.Sprint(2<<20)) {
			t.Fatalf("%s inspect: %s", client, got)
		}
	}
	// An update's BlkioDeviceReadBps (dropped before; the docker CLI has no
	// flag for it, the API has): the new rate by path.
	body := fmt.Sprintf(`{"BlkioDeviceReadBps":[{"Path":%q,"Rate":%d}]}`, dev, 3<<20)
	if status, _, data := te.Exchange("POST", "http://"+te.Addr+"/v1.44/containers/throttled/update", "application/json", strings.NewReader(body)); status != 200 {
		t.Fatalf("update: %d %s", status, data)
	}
	if got := te.run("docker", "inspect", "--format", "{{.HostConfig.BlkioDeviceReadBps}}", "throttled"); !strings.Contains(got, fmt.Sprint(3<<20)) {
		t.Fatalf("docker inspect after docker update: %s", got)
	}
	te.run("docker", "rm", "throttled")
	contains(t, "a character device", te.fails("podman", "run", "--rm", "--device-read-bps", "/dev/null:1mb", "localhost/busybox:latest", "true"), "throttleReadBpsDevice")
}
