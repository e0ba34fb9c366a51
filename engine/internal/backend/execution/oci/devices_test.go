package oci

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/berth-project/berth/engine/internal/core"
)

// TestResolveDevice: podman's --device forms against this host's devices;
// what is not a character or block device, or not of the form, is a 400
// naming devices.
func TestResolveDevice(t *testing.T) {
	link := filepath.Join(t.TempDir(), "null-link")
	if err := os.Symlink("/dev/null", link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		request, source, dest, perms string
	}{
		{"/dev/null", "/dev/null", "/dev/null", "rwm"},
		{"/dev/null:/dev/mine", "/dev/null", "/dev/mine", "rwm"},
		{"/dev/null:r", "/dev/null", "/dev/null", "r"},
		{"/dev/null:/dev/mine:rw", "/dev/null", "/dev/mine", "rw"},
		{link + ":/dev/mine", "/dev/null", "/dev/mine", "rwm"},
	} {
		d, err := ResolveDevice(tc.request)
		if err != nil {
			t.Errorf("%s: %v", tc.request, err)
			continue
		}
		if d.Source != tc.source || d.Node.Path != tc.dest || d.Rule.Access != tc.perms || d.Node.Type != "c" || d.Node.Major != 1 || d.Node.Minor != 3 || !d.Rule.Allow {
			t.Errorf("%s: %+v", tc.request, d)
		}
	}
	for _, bad := range []string{"", "dev/null", "/dev/null:dev/x", "/dev/null:/dev/x:rx", "/dev/null:rr", "/dev/null:/a:r:w", os.TempDir(), "/dev/berth-no-such-device", "/etc/hostname"} {
		_, err := ResolveDevice(bad)
		var fe *core.FieldError
		if !errors.As(err, &fe) || fe.Field != "devices" {
			t.Errorf("%q: %v, want a 400 naming devices", bad, err)
		}
	}
}
