package containers_test

import (
	"slices"
	"testing"
)

// TestReadOnlyWithPodmanTmpfsMounts runs what podman 4.3.1's `run --read-only`
// sends: tmpfs mounts with a propagation option and tmpcopyup. The tmpfs at
// /bin must start with the image's files (tmpcopyup), so sh still runs and
// /bin is writable while the root stays read-only.
func TestReadOnlyWithPodmanTmpfsMounts(t *testing.T) {
	te := startEngine(t)
	opts := []string{"rw", "rprivate", "nosuid", "nodev", "tmpcopyup"}
	code, out := te.run(map[string]any{
		"command":              []string{"sh", "-c", "touch /bin/new && echo bin-rw; touch /tmp/x && echo tmp-rw; touch /new 2>/dev/null || echo root-ro; mount | grep -c ' /bin type tmpfs'"},
		"read_only_filesystem": true,
		"mounts": []map[string]any{
			{"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": opts},
			{"destination": "/bin", "type": "tmpfs", "source": "tmpfs", "options": opts},
			{"destination": "/var", "type": "tmpfs", "source": "tmpfs", "options": []string{"rw", "rshared", "notmpcopyup"}},
		},
	})
	want := []string{"bin-rw", "tmp-rw", "root-ro", "1"}
	if code != 0 || !slices.Equal(out, want) {
		t.Fatalf("exit %d, output %q, want %q", code, out, want)
	}
}
