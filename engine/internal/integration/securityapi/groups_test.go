package securityapi

import (
	"strings"
	"testing"
)

// groupsOf runs podman args (a run or an exec whose command prints
// /proc/self/status) and answers the process's supplementary groups.
func (te *testEngine) groupsOf(args ...string) string {
	te.T.Helper()
	out := te.MustPodman(args...)
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "Groups:"); ok {
			return strings.Join(strings.Fields(rest), " ")
		}
	}
	te.T.Fatalf("podman %v printed no Groups line: %q", args, out)
	return ""
}

// TestSupplementaryGroupsAsPodman: a container's process and an exec's
// hold the supplementary groups Podman 4.3.1 gives them, as measured with
// the same commands beside the engine (the kernel lists them in order). A
// container with a user (the request's or the image's) holds its primary
// group too, and the groups /etc/group lists the user in unless it names
// its group; one without holds only --group-add's. An exec holds the
// groups its user is listed in, and without -u the container's --group-add
// ones, but not the primary group. Before, no process held its primary
// group, so `id` in a container run as nobody printed no groups where
// Podman's and Docker's print groups=65534(nobody).
func TestSupplementaryGroupsAsPodman(t *testing.T) {
	te := startEngine(t)
	te.Load(busybox)
	status := []string{"localhost/busybox:latest", "cat", "/proc/self/status"}
	run := func(opts ...string) string {
		return te.groupsOf(append(append([]string{"run", "--rm"}, opts...), status...)...)
	}
	for _, c := range []struct {
		opts []string
		want string
	}{
		{nil, ""},
		{[]string{"-u", "root"}, "0"},
		{[]string{"-u", "nobody"}, "65534"},
		{[]string{"-u", "1234:5678"}, "5678"},
		{[]string{"--group-add", "10"}, "10"},
		{[]string{"--group-add", "10", "-u", "nobody"}, "10 65534"},
	} {
		if got := run(c.opts...); got != c.want {
			t.Errorf("podman run %v: groups %q, want %q", c.opts, got, c.want)
		}
	}
	// The user the engine's passwd management adds for a bare UID is a
	// member of its own group (Podman's entry, "1234:x:1234:1234"): Podman
	// counts it from the second start on and in every exec.
	if got := run("-u", "1234"); got != "0 1234" {
		t.Errorf("podman run -u 1234: groups %q, want \"0 1234\"", got)
	}

	te.MustPodman("run", "-d", "--name", "grp", "--group-add", "10", "-u", "nobody", "localhost/busybox:latest", "sleep", "600")
	te.MustPodman("run", "-d", "--name", "num", "-u", "1234", "localhost/busybox:latest", "sleep", "600")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"grp"}, "10"},
		{[]string{"-u", "root", "grp"}, ""},
		{[]string{"-u", "nobody", "grp"}, ""},
		{[]string{"num"}, "1234"},
		{[]string{"-u", "1234", "num"}, "1234"},
		{[]string{"-u", "nobody", "num"}, ""},
	} {
		args := append(append([]string{"exec"}, c.args...), "cat", "/proc/self/status")
		if got := te.groupsOf(args...); got != c.want {
			t.Errorf("podman exec %v: groups %q, want %q", c.args, got, c.want)
		}
	}
}
