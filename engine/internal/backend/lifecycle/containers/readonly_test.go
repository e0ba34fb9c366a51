package containers_test

import (
	"strings"
	"testing"
)

// TestReadWriteTmpfs: read_write_tmpfs, which Podman 5 and 6 send for
// --read-only (with --read-only-tmpfs, their default): a read-only
// container gets writable tmpfs at /tmp, /var/tmp and /run, except where
// the request mounts something else; false makes /dev read-only too.
func TestReadWriteTmpfs(t *testing.T) {
	te := startEngine(t)
	script := `grep -E ' /(tmp|var/tmp|run|dev) ' /proc/mounts; touch /tmp/w && echo tmp-writable; touch /etc/w || echo etc-read-only`
	code, lines := te.run(map[string]any{"command": []string{"sh", "-c", script}, "read_only_filesystem": true, "read_write_tmpfs": true,
		"mounts": []map[string]any{{"destination": "/run", "type": "tmpfs", "source": "tmpfs", "options": []string{"size=1m"}}}})
	out := strings.Join(lines, "\n")
	if code != 0 || !strings.Contains(out, "tmp-writable") || !strings.Contains(out, "etc-read-only") {
		t.Fatalf("read-only with read-write tmpfs: exit %d\n%s", code, out)
	}
	for _, dest := range []string{"/tmp", "/var/tmp", "/run"} {
		if !strings.Contains(out, "tmpfs "+dest+" tmpfs rw") {
			t.Errorf("no read-write tmpfs at %s:\n%s", dest, out)
		}
	}
	if !strings.Contains(out, "tmpfs /run tmpfs rw,nosuid,nodev,relatime,size=1024k") && !strings.Contains(out, "tmpfs /run tmpfs rw,relatime,size=1024k") {
		t.Errorf("the request's own /run mount was replaced:\n%s", out)
	}

	code, lines = te.run(map[string]any{"command": []string{"sh", "-c", script}, "read_only_filesystem": true, "read_write_tmpfs": false})
	out = strings.Join(lines, "\n")
	if strings.Contains(out, "tmp-writable") || strings.Contains(out, " /tmp ") || !strings.Contains(out, "tmpfs /dev tmpfs ro") {
		t.Errorf("read-only without read-write tmpfs: exit %d\n%s", code, out)
	}
}
