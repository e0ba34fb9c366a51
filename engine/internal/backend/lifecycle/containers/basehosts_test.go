package containers_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBaseHostsFile: base_hosts_file (Podman 5 and 6's --hosts-file): a
// host file's or the image's /etc/hosts entries come first in the
// generated /etc/hosts, the engine's own after them; none (or nothing)
// gives only the engine's; a relative path or a missing file is a 400.
func TestBaseHostsFile(t *testing.T) {
	te := startEngine(t)
	hostFile := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hostFile, []byte("10.1.2.3\tfromhost"), 0o644); err != nil {
		t.Fatal(err)
	}
	hosts := func(spec map[string]any) string {
		spec["command"] = []string{"cat", "/etc/hosts"}
		spec["hostname"] = "box"
		code, lines := te.run(spec)
		if code != 0 {
			t.Fatalf("cat /etc/hosts with %v: exit %d %v", spec, code, lines)
		}
		return strings.Join(lines, "\n")
	}
	out := hosts(map[string]any{"base_hosts_file": hostFile})
	if !strings.HasPrefix(out, "10.1.2.3\tfromhost\n") || !strings.Contains(out, "box") {
		t.Errorf("a host file as the base:\n%s", out)
	}
	if out := hosts(map[string]any{"base_hosts_file": "none"}); strings.Contains(out, "fromhost") || !strings.Contains(out, "box") {
		t.Errorf("none:\n%s", out)
	}

	// An image whose /etc/hosts holds an entry: written with the image's
	// file left in place (use_image_hosts), then committed.
	id := te.create(map[string]any{"use_image_hosts": true, "command": []string{"sh", "-c", "printf '10.9.9.9 inimage\\n' > /etc/hosts"}})
	te.Must(http.StatusNoContent, "POST", "/containers/"+id+"/start", nil)
	te.wait(id)
	te.Must(http.StatusOK, "POST", "/commit?container="+id+"&repo=localhost/hostsimg&tag=1", nil)
	out = hosts(map[string]any{"image": "localhost/hostsimg:1", "base_hosts_file": "image"})
	if !strings.HasPrefix(out, "10.9.9.9 inimage\n") || !strings.Contains(out, "box") {
		t.Errorf("the image's file as the base:\n%s", out)
	}
	// busybox has no /etc/hosts: an empty base.
	if out := hosts(map[string]any{"base_hosts_file": "image"}); !strings.Contains(out, "box") {
		t.Errorf("an image without /etc/hosts:\n%s", out)
	}

	for _, tc := range []struct {
		base string
		want int
	}{{"relative/hosts", http.StatusBadRequest}, {filepath.Join(t.TempDir(), "missing"), http.StatusBadRequest}} {
		status, body := te.Do("POST", "/containers/create", map[string]any{"image": "busybox", "base_hosts_file": tc.base})
		if status == http.StatusCreated {
			var c struct {
				ID string `json:"Id"`
			}
			json.Unmarshal(body, &c)
			status, body = te.Do("POST", "/containers/"+c.ID+"/start", nil)
			te.Do("DELETE", "/containers/"+c.ID+"?force=true", nil)
		}
		if status != tc.want || !strings.Contains(string(body), "base_hosts_file") {
			t.Errorf("base_hosts_file %q: %d %s", tc.base, status, body)
		}
	}
}
