package containers_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestPasswdEntries: a container run as a numeric user its image lacks
// gets /etc/passwd and /etc/group entries (Podman's default): in its root,
// or with a read-only root in bound copies; passwd_entry and group_entry
// template them; hostusers adds host users; manage_password false adds
// nothing. A multi-line template and an unknown host user are 400s naming
// the member.
func TestPasswdEntries(t *testing.T) {
	te := startEngine(t)
	te.loadBusybox()
	out := func(spec map[string]any) string {
		t.Helper()
		code, lines := te.run(spec)
		if code != 0 {
			t.Fatalf("%v exited %d: %q", spec, code, lines)
		}
		return strings.Join(lines, "\n")
	}
	script := []string{"sh", "-c", "whoami; id -g; tail -1 /etc/passwd; tail -1 /etc/group"}
	if got, want := out(map[string]any{"user": "1234", "command": script}), "1234\n0\n1234:*:1234:0:container user:/:/bin/sh\n1234:x:1234:1234"; got != want {
		t.Errorf("--user 1234:\n%s\nwant:\n%s", got, want)
	}
	got := out(map[string]any{"user": "1234:5678", "work_dir": "/tmp", "command": script,
		"passwd_entry": "$USERNAME:x:$UID:$GID:$NAME:$HOME:/bin/false", "group_entry": "g$GROUPNAME:x:$GID:$USERLIST"})
	if want := "1234\n5678\n1234:x:1234:5678:container user:/tmp:/bin/false\ng5678:x:5678:1234"; got != want {
		t.Errorf("templates:\n%s\nwant:\n%s", got, want)
	}
	if got := out(map[string]any{"user": "1234", "read_only_filesystem": true, "command": []string{"sh", "-c", "whoami; grep -c ' /etc/passwd ' /proc/mounts"}}); got != "1234\n1" {
		t.Errorf("a read-only root: %q, want the user and one bind mount of /etc/passwd", got)
	}
	// The image's own user is left alone.
	if got := out(map[string]any{"user": "0", "command": []string{"sh", "-c", "grep -c 'container user' /etc/passwd || true"}}); got != "0" {
		t.Errorf("root got an entry: %q", got)
	}
	if got := out(map[string]any{"hostusers": []string{"daemon"}, "command": []string{"sh", "-c", "grep '^daemon:' /etc/passwd | cut -d: -f1,3"}}); got != "daemon:1" {
		t.Errorf("hostusers daemon: %q", got)
	}
	code, lines := te.run(map[string]any{"user": "1234", "manage_password": false, "command": []string{"whoami"}})
	if code == 0 {
		t.Errorf("manage_password false still named the user: %q", lines)
	}
	for field, spec := range map[string]map[string]any{
		"passwd_entry": {"user": "1234", "passwd_entry": "a:b\nroot::0:0::/:/bin/sh"},
		"group_entry":  {"user": "1234", "group_entry": "a\nb"},
		"hostusers":    {"hostusers": []string{"no-such-host-user"}},
	} {
		spec["image"], spec["name"] = "busybox", "refused-passwd"
		status, body := te.Do("POST", "/containers/create", spec)
		if status != http.StatusBadRequest || !strings.Contains(string(body), field) {
			t.Errorf("%s: %d %s, want a 400 naming it", field, status, body)
		}
	}
}
