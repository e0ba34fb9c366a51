package systemdgen

import (
	"errors"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
)

// TestRunArgs: a create command becomes the arguments of the unit's podman
// run, without the global flags and the flags the unit sets itself.
func TestRunArgs(t *testing.T) {
	testdeadline.Set(t, testdeadline.Default)
	cases := []struct {
		cmd  []string
		want string
	}{
		{[]string{"podman", "--remote", "--url", "tcp://x:1", "run", "-d", "--rm", "--name", "web", "busybox", "sleep", "1"}, "--name web busybox sleep 1"},
		{[]string{"podman", "create", "--cidfile", "/tmp/id", "--replace", "-e", "A=1", "busybox"}, "--name c1 -e A=1 busybox"},
		{[]string{"podman", "container", "create", "--name=web", "--cidfile=/x", "busybox"}, "--name=web busybox"},
	}
	for _, tc := range cases {
		got, err := runArgs(&core.InspectContainerData{Name: "c1", Config: &core.InspectContainerConfig{CreateCommand: tc.cmd}})
		if err != nil || strings.Join(got, " ") != tc.want {
			t.Errorf("runArgs(%q) = %q, %v; want %q", tc.cmd, got, err, tc.want)
		}
	}
	if _, err := runArgs(&core.InspectContainerData{Name: "c1"}); !errors.Is(err, core.ErrInvalidArgument) {
		t.Errorf("no create command: %v", err)
	}
}

// TestQuoteCommand: systemd sees each argument as given.
func TestQuoteCommand(t *testing.T) {
	testdeadline.Set(t, testdeadline.Default)
	got := quoteCommand([]string{"/usr/bin/podman", "run", "--cidfile=%t/%n.ctr-id", "sh", "-c", `echo "$HOME" 100%`, ""})
	want := `/usr/bin/podman run --cidfile=%t/%n.ctr-id sh -c "echo \"$$HOME\" 100%%" ""`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestClientURL: a wildcard listen address becomes loopback.
func TestClientURL(t *testing.T) {
	testdeadline.Set(t, testdeadline.Default)
	for listen, want := range map[string]string{
		"tcp://0.0.0.0:8080":           "tcp://127.0.0.1:8080",
		"tcp://127.0.0.1:9":            "tcp://127.0.0.1:9",
		"unix:///run/berth/berth.sock": "unix:///run/berth/berth.sock",
	} {
		if got := clientURL(listen); got != want {
			t.Errorf("clientURL(%s) = %s, want %s", listen, got, want)
		}
	}
}
