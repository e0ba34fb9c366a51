package systemapi

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/core"
)

// volumeMountpoint creates a volume and returns its host directory.
func (te *testEngine) volumeMountpoint(name string) string {
	te.T.Helper()
	var v struct{ Mountpoint string }
	te.Decode(te.Must(http.StatusCreated, "POST", "/volumes/create", map[string]any{"Name": name}), &v)
	return v.Mountpoint
}

func TestDiskUsage(t *testing.T) {
	te := startEngine(t)
	te.Load(
		imageWith([]string{"localhost/df-a:1"}, "a.bin", 1000, nil),
		imageWith([]string{"localhost/df-b:1", "localhost/df-b:2"}, "b.bin", 3000, nil),
	)
	used := te.volumeMountpoint("df-used")
	if err := os.WriteFile(filepath.Join(used, "f"), []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	unused := te.volumeMountpoint("df-unused")
	if err := os.WriteFile(filepath.Join(unused, "g"), []byte("1234567"), 0o644); err != nil {
		t.Fatal(err)
	}
	running := te.Create(map[string]any{
		"image": "localhost/df-a:1", "name": "df-running", "command": []string{"sleep", "60"},
		"volumes": []map[string]any{{"Name": "df-used", "Dest": "/data"}},
	})
	te.Must(http.StatusNoContent, "POST", "/containers/"+running+"/start", nil)
	// A container that was never started counts as a user of its volume
	// too (Links 2 below), as Podman 4.3.1's system df -v shows it.
	te.Create(map[string]any{"image": "localhost/df-a:1", "name": "df-created", "command": []string{"true"},
		"volumes": []map[string]any{{"Name": "df-used", "Dest": "/data"}}})

	var report core.DiskUsageReport
	te.Get("/system/df", &report)

	byTag := map[string]*core.ImageDiskUsage{}
	for _, img := range report.Images {
		byTag[img.Repository+":"+img.Tag] = img
	}
	a, b1, b2 := byTag["localhost/df-a:1"], byTag["localhost/df-b:1"], byTag["localhost/df-b:2"]
	if len(report.Images) != 3 || a == nil || b1 == nil || b2 == nil {
		t.Fatalf("images: one entry per tag wanted, got %+v", report.Images)
	}
	if b1.ImageID != b2.ImageID || b1.Size != b2.Size {
		t.Errorf("the tags of one image differ: %+v %+v", b1, b2)
	}
	// Both images are built on the same busybox layer: shared by both,
	// and the only shared part; their own layers are unique.
	if a.SharedSize == 0 || a.SharedSize != b1.SharedSize {
		t.Errorf("shared sizes %d and %d, want the busybox layer's size in both", a.SharedSize, b1.SharedSize)
	}
	if a.UniqueSize < 1000 || b1.UniqueSize < 3000 || b1.UniqueSize-a.UniqueSize < 1500 {
		t.Errorf("unique sizes %d (1000-byte file) and %d (3000-byte file)", a.UniqueSize, b1.UniqueSize)
	}
	if a.Size != a.SharedSize+a.UniqueSize {
		t.Errorf("size %d != shared %d + unique %d", a.Size, a.SharedSize, a.UniqueSize)
	}
	if a.Containers != 2 || b1.Containers != 0 {
		t.Errorf("containers per image: a %d (want 2), b %d (want 0)", a.Containers, b1.Containers)
	}
	if want := a.SharedSize + a.UniqueSize + b1.UniqueSize; report.ImagesSize != want {
		t.Errorf("ImagesSize %d, want %d (each layer once)", report.ImagesSize, want)
	}

	if len(report.Containers) != 2 {
		t.Fatalf("containers: %+v", report.Containers)
	}
	for _, c := range report.Containers {
		switch c.Names {
		case "df-running":
			if c.Status != "running" || c.LocalVolumes != 1 || c.ContainerID != running || strings.Join(c.Command, " ") != "sleep 60" {
				t.Errorf("running container: %+v", c)
			}
		case "df-created":
			if c.Status != "created" || c.LocalVolumes != 1 {
				t.Errorf("created container: %+v", c)
			}
		default:
			t.Errorf("unexpected container %+v", c)
		}
		if c.Image != a.ImageID || c.Size < a.Size || c.Size < c.RWSize || c.Created.IsZero() {
			t.Errorf("container sizes or image: %+v (image %s of size %d)", c, a.ImageID, a.Size)
		}
	}

	volumes := map[string]*core.VolumeDiskUsage{}
	for _, v := range report.Volumes {
		volumes[v.VolumeName] = v
	}
	if v := volumes["df-used"]; v == nil || *v != (core.VolumeDiskUsage{VolumeName: "df-used", Links: 2, Size: 5}) {
		t.Errorf("used volume: %+v", v)
	}
	if v := volumes["df-unused"]; v == nil || *v != (core.VolumeDiskUsage{VolumeName: "df-unused", Links: 0, Size: 7, ReclaimableSize: 7}) {
		t.Errorf("unused volume: %+v", v)
	}
}
