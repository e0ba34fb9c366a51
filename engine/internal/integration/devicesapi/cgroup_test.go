package devicesapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestDeviceCgroupRule: --device-cgroup-rule opens a device number the
// default rules close (runc lets any node be made, but opening /dev/fuse's
// c 10:229 needs the cgroup's r);
// inspect lists the rule; an invalid rule is a 400 naming it, and nothing
// is created.
func TestDeviceCgroupRule(t *testing.T) {
	te := startEngine(t)
	mknod := []string{"localhost/busybox", "sh", "-c", "mknod /dev/xfuse c 10 229 && : < /dev/xfuse && echo opened"}
	if out, err := te.podman(append([]string{"run", "--rm", "--cap-add", "MKNOD"}, mknod...)...); err == nil || strings.Contains(out, "opened") {
		t.Fatalf("opening c 10:229 without a rule: err %v\n%s", err, out)
	}
	out := te.mustPodman(append([]string{"run", "--name", "ruled", "--cap-add", "MKNOD", "--device-cgroup-rule", "c 10:229 rw"}, mknod...)...)
	if !strings.Contains(out, "opened") {
		t.Fatalf("opening c 10:229 with the rule c 10:229 rw:\n%s", out)
	}
	// Podman 4.3.1's inspect has no place for them; Docker's does.
	var inspect struct {
		HostConfig struct{ DeviceCgroupRules []string }
	}
	json.Unmarshal(te.Must(http.StatusOK, "GET", "/containers/ruled/json", nil), &inspect)
	if got := inspect.HostConfig.DeviceCgroupRules; len(got) != 1 || got[0] != "c 10:229 rw" {
		t.Errorf("inspect's HostConfig.DeviceCgroupRules: %q", got)
	}
	before := te.ContainerCount()
	for _, rule := range []map[string]any{
		{"allow": true, "type": "x", "access": "rwm"},
		{"allow": true, "type": "c", "major": 1, "minor": 3, "access": "rwx"},
		{"allow": true, "type": "b", "major": -2, "access": "r"},
	} {
		status, message, body := te.create(map[string]any{
			"image": "localhost/busybox", "command": []string{"true"}, "device_cgroup_rule": []any{rule},
		})
		if status != http.StatusBadRequest || !strings.HasPrefix(message, "invalid device_cgroup_rule: rule 0 (") {
			t.Errorf("rule %v: %d %s, want a 400 naming it", rule, status, body)
		}
	}
	if n := te.ContainerCount(); n != before {
		t.Errorf("invalid rules left containers: %d, had %d", n, before)
	}
}

// TestGroupAddKeepGroups: keep-groups keeps the caller's supplementary
// groups through crun's run.oci.keep_original_groups; runc has no such
// option, so an engine running runc refuses it with the reason, and
// refuses it beside other groups as Podman does. (podman --remote 4.3.1
// refuses --group-add keep-groups itself before sending anything.)
func TestGroupAddKeepGroups(t *testing.T) {
	te := startEngine(t)
	for _, tc := range []struct {
		groups []string
		want   string
	}{
		{[]string{"keep-groups"}, "keep-groups needs crun"},
		{[]string{"keep-groups", "wheel"}, "keep-groups cannot be combined with other groups"},
	} {
		status, message, body := te.create(map[string]any{
			"image": "localhost/busybox", "command": []string{"id"}, "groups": tc.groups,
		})
		if status != http.StatusBadRequest || !strings.HasPrefix(message, "invalid groups: ") || !strings.Contains(message, tc.want) {
			t.Errorf("groups %v: %d %s, want a 400 saying %q", tc.groups, status, body, tc.want)
		}
	}
	if out, err := te.podman("run", "--rm", "--group-add", "keep-groups", "localhost/busybox", "id"); err == nil || !strings.Contains(out, "not supported in remote mode") {
		t.Errorf("podman --remote run --group-add keep-groups: err %v\n%s", err, out)
	}
	if n := te.ContainerCount(); n != 0 {
		t.Errorf("refused creates left %d containers", n)
	}
	// Ordinary groups still work.
	if out := te.mustPodman("run", "--rm", "--group-add", "10", "localhost/busybox", "id", "-G"); !strings.Contains(out, "10") {
		t.Errorf("--group-add 10: %s", out)
	}
}
