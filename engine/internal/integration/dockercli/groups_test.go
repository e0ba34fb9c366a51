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
	te.run("docker", "run", "-d", "--name", "grp", "--group-add", "10", "-u", "nobody", "localhost/busybox", "sleep", "600")
	img := "localhost/busybox"
	for _, c := range []struct {
		command []string
		want    string
	}{
		{[]string{"run", "--rm", img}, "0"},
		{[]string{"run", "--rm", "-u", "1234", img}, "0"},
		{[]string{"run", "--rm", "-u", "1234:5678", img}, "5678"},
		{[]string{"run", "--rm", "-u", "nobody", img}, "65534"},
		{[]string{"run", "--rm", "--group-add", "10", img}, "0 10"},
		{[]string{"run", "--rm", "--group-add", "10", "-u", "nobody", img}, "10 65534"},
		{[]string{"exec", "grp"}, "10 65534"},
		{[]string{"exec", "-u", "root", "grp"}, "0 10"},
		{[]string{"exec", "-u", "1234", "grp"}, "0 10"},
	} {
		out := te.run("docker", append(c.command, "cat", "/proc/self/status")...)
		if got := statusGroups(t, "docker", out); got != c.want {
			t.Errorf("docker %v: groups %q, want %q", c.command, got, c.want)
		}
	}
	te.run("docker", "rm", "-f", "grp")
}
