package dockercli

import (
	"strings"
	"testing"
)

// statusGroups answers the Groups line of /proc/self/status in out.
func statusGroups(t *testing.T, what, out string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "Groups:"); ok {
			return strings.Join(strings.Fields(rest), " ")
		}
	}
	t.Fatalf("%s printed no Groups line: %q", what, out)
	return ""
}

// TestDockerSupplementaryGroupsAsDockerd: through Docker's API a
// container's process and an exec's hold the supplementary groups dockerd
// 20.10 gives them (measured with the same commands beside the engine):
// the primary group and the user's member groups always, root's too, then
// --group-add; an exec its user's primary and member groups and the
// container's --group-add ones. The libpod API keeps Podman's rule
// (TestSupplementaryGroupsAsPodman). Before, no process held its primary
// group: `id` printed no groups where dockerd's prints groups=0(root).
func TestDockerSupplementaryGroupsAsDockerd(t *testing.T) {
	te := startEngine(t)
	for _, c := range []struct {
		opts []string
		want string
	}{
		{nil, "0"},
		{[]string{"-u", "1234"}, "0"},
		{[]string{"-u", "1234:5678"}, "5678"},
		{[]string{"-u", "nobody"}, "65534"},
		{[]string{"--group-add", "10"}, "0 10"},
		{[]string{"--group-add", "10", "-u", "nobody"}, "10 65534"},
	} {
		args := append(append([]string{"run", "--rm"}, c.opts...), "localhost/busybox", "cat", "/proc/self/status")
		if got := statusGroups(t, "docker run", te.run("docker", args...)); got != c.want {
			t.Errorf("docker run %v: groups %q, want %q", c.opts, got, c.want)
		}
	}
	te.run("docker", "run", "-d", "--name", "grp", "--group-add", "10", "-u", "nobody", "localhost/busybox", "sleep", "600")
	for _, c := range []struct {
		opts []string
		want string
	}{
		{nil, "10 65534"},
		{[]string{"-u", "root"}, "0 10"},
		{[]string{"-u", "1234"}, "0 10"},
	} {
		args := append(append([]string{"exec"}, c.opts...), "grp", "cat", "/proc/self/status")
		if got := statusGroups(t, "docker exec", te.run("docker", args...)); got != c.want {
			t.Errorf("docker exec %v: groups %q, want %q", c.opts, got, c.want)
		}
	}
	te.run("docker", "rm", "-f", "grp")
}
