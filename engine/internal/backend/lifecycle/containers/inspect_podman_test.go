package containers_test

import (
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestInspectPodmanFields checks inspect fields against what Podman 4.3.1
// reports for the same request, and that the process sees the same.
func TestInspectPodmanFields(t *testing.T) {
	te := startEngine(t)
	var img struct{ Digest string }
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/images/busybox/json", nil), &img)
	if img.Digest == "" {
		t.Fatal("image has no digest")
	}
	id := te.create(map[string]any{
		"command":         []string{"sh", "-c", "echo $container; df -k /dev/shm | tail -1; ls /bin/busybox"},
		"resource_limits": map[string]any{"cpu": map[string]any{"quota": 50000, "period": 100000}},
		"mounts": []map[string]any{
			{"destination": "/scratch", "type": "tmpfs", "source": "tmpfs", "options": []string{"size=1m"}},
			// No options: Podman's defaults include tmpcopyup, so /bin keeps its content.
			{"destination": "/bin", "type": "tmpfs", "source": "tmpfs"},
		},
		"cap_drop": []string{"CHOWN"},
		"cap_add":  []string{"net_admin"},
	})
	var d struct {
		ImageDigest string
		Config      struct{ Env []string }
		HostConfig  struct {
			NanoCpus        int64
			ShmSize         int64
			Tmpfs           map[string]string
			CapAdd, CapDrop []string
		}
		GraphDriver struct {
			Name string
			Data map[string]string
		}
	}
	if err := json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+id+"/json", nil), &d); err != nil {
		t.Fatal(err)
	}
	if d.ImageDigest != img.Digest {
		t.Errorf("ImageDigest %q, want %q", d.ImageDigest, img.Digest)
	}
	// Podman 4.3.1's environment before the first start: containers.conf's
	// PATH and TERM and container=podman, no HOSTNAME or HOME (they come
	// at init).
	if want := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "TERM=xterm", "container=podman"}; !slices.Equal(d.Config.Env, want) {
		t.Errorf("Env before the start %q, want %q", d.Config.Env, want)
	}
	if d.HostConfig.NanoCpus != 500000000 {
		t.Errorf("NanoCpus %d, want 500000000", d.HostConfig.NanoCpus)
	}
	if d.HostConfig.ShmSize != 65536000 {
		t.Errorf("ShmSize %d, want 65536000", d.HostConfig.ShmSize)
	}
	wantTmpfs := map[string]string{"/scratch": "size=1m,rw,rprivate,nosuid,nodev,tmpcopyup", "/bin": "rw,rprivate,nosuid,nodev,tmpcopyup"}
	if len(d.HostConfig.Tmpfs) != 2 || d.HostConfig.Tmpfs["/scratch"] != wantTmpfs["/scratch"] || d.HostConfig.Tmpfs["/bin"] != wantTmpfs["/bin"] {
		t.Errorf("Tmpfs %v, want %v", d.HostConfig.Tmpfs, wantTmpfs)
	}
	if !slices.Equal(d.HostConfig.CapDrop, []string{"CAP_CHOWN"}) || !slices.Equal(d.HostConfig.CapAdd, []string{"CAP_NET_ADMIN"}) {
		t.Errorf("CapAdd %q CapDrop %q, want [CAP_NET_ADMIN] [CAP_CHOWN]", d.HostConfig.CapAdd, d.HostConfig.CapDrop)
	}
	if d.GraphDriver.Name == "overlay" {
		for _, k := range []string{"LowerDir", "UpperDir", "WorkDir"} {
			dir := strings.Split(d.GraphDriver.Data[k], ":")[0]
			if _, err := os.Stat(dir); dir == "" || err != nil {
				t.Errorf("GraphDriver.Data[%s] = %q: %v", k, d.GraphDriver.Data[k], err)
			}
		}
	}
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	if code := te.wait(id); code != 0 {
		t.Fatalf("exit %d: %q", code, te.LogLines(id))
	}
	// After it, the environment the process had: HOME is the user's home
	// from the image's /etc/passwd (root's /root), as Podman shows it.
	var after struct{ Config struct{ Env []string } }
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/"+id+"/json", nil), &after)
	if !slices.Contains(after.Config.Env, "HOME=/root") || !slices.Contains(after.Config.Env, "HOSTNAME="+id[:12]) {
		t.Errorf("Env after the start %q, want HOME=/root and HOSTNAME=%s", after.Config.Env, id[:12])
	}
	out := te.LogLines(id)
	// 65536000 bytes are 64000 KiB.
	if len(out) != 3 || out[0] != "podman" || !slices.Contains(strings.Fields(out[1]), "64000") || out[2] != "/bin/busybox" {
		t.Fatalf("output %q, want container=podman, a 64000 KiB /dev/shm and /bin copied up", out)
	}
}
