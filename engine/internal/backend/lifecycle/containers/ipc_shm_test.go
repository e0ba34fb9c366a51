package containers

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// shmTar writes a devshm.tar of the given entries into dir.
func shmTar(t *testing.T, dir string, entries ...tar.Header) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(h.Name))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte(h.Name))
		}
	}
	tw.Close()
	if err := os.WriteFile(filepath.Join(dir, shmCheckpointFile), buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestSaveAndRestoreShm: the files of a shareable /dev/shm go into the
// checkpoint's tar and come back with their modes; a tar from an imported
// archive whose entries leave the directory (.., an absolute path, through
// a link) or are devices is refused and writes nothing outside it.
func TestSaveAndRestoreShm(t *testing.T) {
	static := t.TempDir()
	rec := &record{}
	rec.StaticDir = static
	shm := shmDir(static)
	os.MkdirAll(filepath.Join(shm, "sub"), 0o755)
	os.WriteFile(filepath.Join(shm, "sub", "seg"), []byte("segment"), 0o640)
	os.Symlink("sub/seg", filepath.Join(shm, "link"))
	ckpt := t.TempDir()
	if err := saveShm(rec, ckpt); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(shm)
	os.MkdirAll(shm, 0o700)
	if err := restoreShm(rec, ckpt); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(shm, "link"))
	fi, _ := os.Stat(filepath.Join(shm, "sub", "seg"))
	if err != nil || string(data) != "segment" || fi == nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("restored: %q %v %v", data, err, fi)
	}

	outside := t.TempDir()
	for name, entries := range map[string][]tar.Header{
		"dotdot":   {{Name: "../escape", Typeflag: tar.TypeReg, Mode: 0o644}},
		"absolute": {{Name: outside + "/abs", Typeflag: tar.TypeReg, Mode: 0o644}},
		"via link": {{Name: "out", Typeflag: tar.TypeSymlink, Linkname: outside}, {Name: "out/through", Typeflag: tar.TypeReg, Mode: 0o644}},
		"device":   {{Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3, Mode: 0o666}},
	} {
		os.RemoveAll(shm)
		os.MkdirAll(shm, 0o700)
		shmTar(t, ckpt, entries...)
		if err := restoreShm(rec, ckpt); err == nil || !strings.Contains(err.Error(), shmCheckpointFile) {
			t.Errorf("%s: %v, want an error naming %s", name, err, shmCheckpointFile)
		}
	}
	if left, _ := os.ReadDir(outside); len(left) > 0 {
		t.Fatalf("a refused tar wrote outside the directory: %v", left)
	}
	if _, err := os.Stat(filepath.Join(static, "escape")); err == nil {
		t.Fatal("../escape was written")
	}

	// A private container keeps no /dev/shm of its own to restore into.
	rec.Spec.IpcNS.NSMode = "private"
	if err := restoreShm(rec, ckpt); err != nil {
		t.Fatalf("a private container: %v", err)
	}
}
