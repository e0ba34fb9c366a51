package transfertest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/testimage"
)

// TestFullCheckIgnoresSymlinkModes: an image whose tar gives its symlinks
// mode 0644 checks clean and a repair keeps it (before: "layer content
// modified" for every symlink, and repair removed the image), while a real
// change of a file's mode is still found.
func TestFullCheckIgnoresSymlinkModes(t *testing.T) {
	e := newEnv(t)
	links := testimage.Layer{Files: []testimage.File{
		{Path: "links", Dir: true},
		{Path: "links/sh", Linkname: "/bin/busybox", Mode: 0o644},
		{Path: "links/ls", Linkname: "../bin/busybox", Mode: 0o600},
		{Path: "links/data", Data: []byte("data"), Mode: 0o644},
	}}
	img := withLayer(testimage.Busybox("localhost/links:1", "true"), links)
	names, err := e.transfer.Load(context.Background(), bytes.NewReader(archive(t, testimage.Docker, img)), core.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	report, err := e.store.Check(context.Background(), core.SystemCheckOptions{Repair: true})
	if err != nil {
		t.Fatal(err)
	}
	if report.Errors || len(report.RemovedImages) > 0 {
		t.Fatalf("a freshly loaded image does not check clean: %+v", report)
	}
	if _, err := e.store.Lookup(context.Background(), names[0]); err != nil {
		t.Fatalf("the image is gone after a repair: %v", err)
	}

	// A real change is still a finding.
	li, err := e.store.Lookup(context.Background(), names[0])
	if err != nil {
		t.Fatal(err)
	}
	st := e.store.Storage()
	simg, err := st.Image(li.ID)
	if err != nil {
		t.Fatal(err)
	}
	mnt, err := st.Mount(simg.TopLayer, "")
	if err != nil {
		t.Fatal(err)
	}
	chmodErr := os.Chmod(filepath.Join(mnt, "links", "data"), 0o600)
	if _, err := st.Unmount(simg.TopLayer, true); err != nil {
		t.Fatal(err)
	}
	if chmodErr != nil {
		t.Fatal(chmodErr)
	}
	report, err = e.store.Check(context.Background(), core.SystemCheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !report.Errors || len(report.Layers[simg.TopLayer]) == 0 {
		t.Fatalf("a changed file mode is not found: %+v", report)
	}
}
