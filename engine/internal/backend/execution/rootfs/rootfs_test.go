package rootfs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func fakeRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("root:x:0:0:root:/root:/bin/sh\n# comment\nbad line\nwww:x:33:44::/:/bin/false\n"), 0o644)
	os.WriteFile(filepath.Join(root, "etc/group"), []byte("root:x:0:\nstaff:x:50:\n"), 0o644)
	return root
}

func TestResolveUser(t *testing.T) {
	root := fakeRoot(t)
	tests := []struct {
		spec     string
		uid, gid uint32
		err      error
	}{
		{spec: "root", uid: 0, gid: 0},
		{spec: "www", uid: 33, gid: 44},
		{spec: "33", uid: 33, gid: 44},
		{spec: "1000", uid: 1000, gid: 0},
		{spec: "www:staff", uid: 33, gid: 50},
		{spec: "www:7", uid: 33, gid: 7},
		{spec: "nobody", err: ErrNoSuchUser},
		{spec: "www:nogroup", err: ErrNoSuchUser},
	}
	for _, tt := range tests {
		uid, gid, err := ResolveUser(root, tt.spec)
		if tt.err != nil {
			if !errors.Is(err, tt.err) {
				t.Errorf("ResolveUser(%q) err = %v, want %v", tt.spec, err, tt.err)
			}
			continue
		}
		if err != nil || uid != tt.uid || gid != tt.gid {
			t.Errorf("ResolveUser(%q) = %d:%d, %v; want %d:%d", tt.spec, uid, gid, err, tt.uid, tt.gid)
		}
	}
	if uid, gid, err := ResolveUser(t.TempDir(), "root"); err != nil || uid != 0 || gid != 0 {
		t.Errorf("root without a passwd file: %d:%d %v", uid, gid, err)
	}
	for _, bad := range []string{"", ":", "a:", ":b", "a:b:c", "a b", "../x"} {
		if _, _, err := ParseUserSpec(bad); err == nil {
			t.Errorf("ParseUserSpec(%q) accepted", bad)
		}
	}
}

func TestReadFileRefusesSymlinks(t *testing.T) {
	root := fakeRoot(t)
	host := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(host, []byte("host:x:0:0\n"), 0o600)
	if err := os.Symlink(host, filepath.Join(root, "etc/shadow")); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(root, "etc/shadow"); !errors.Is(err, ErrSymlink) {
		t.Fatalf("symlinked file: %v", err)
	}
	other := t.TempDir()
	os.MkdirAll(filepath.Join(other, "real"), 0o755)
	os.Symlink(filepath.Join(other, "real"), filepath.Join(root, "lnk"))
	if _, err := ReadFile(root, "lnk/passwd"); !errors.Is(err, ErrSymlink) {
		t.Fatalf("symlinked directory: %v", err)
	}
	if _, err := ReadFile(root, "../etc/passwd"); err == nil {
		t.Fatal("dot-dot accepted")
	}
	if names := Names(root, "etc/passwd"); names[33] != "www" || names[0] != "root" {
		t.Fatalf("names %v", names)
	}
}
