package dockercli

import (
	"archive/tar"
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDockerImageNamesAsDockerd: the image routes show Docker Hub names
// as dockerd does, without docker.io/ and library/ (docker images, the
// RepoTags of inspect, the Tags of history, rmi's Untagged lines), and a
// reference filter shows only the names it matches: `docker images
// alpine` lists alpine's tags, not every tag of the image. Compared with
// dockerd 20.10 beside the engine.
func TestDockerImageNamesAsDockerd(t *testing.T) {
	te := startEngine(t)
	te.run("docker", "tag", "localhost/busybox:latest", "alpine:3")
	te.run("docker", "tag", "localhost/busybox:latest", "myrepo/app:v1")

	listed := strings.Fields(te.run("docker", "images", "--format", "{{.Repository}}:{{.Tag}}"))
	for _, want := range []string{"alpine:3", "myrepo/app:v1", "localhost/busybox:latest"} {
		if !strings.Contains(" "+strings.Join(listed, " ")+" ", " "+want+" ") {
			t.Fatalf("docker images lacks %s: %v", want, listed)
		}
	}
	for pattern, want := range map[string]string{"alpine": "alpine:3", "myrepo/*": "myrepo/app:v1", "*/app": "myrepo/app:v1"} {
		got := strings.TrimSpace(te.run("docker", "images", "--filter", "reference="+pattern, "--format", "{{.Repository}}:{{.Tag}}"))
		if got != want {
			t.Fatalf("docker images --filter reference=%s: %q, want %q (dockerd's)", pattern, got, want)
		}
	}
	if got := strings.TrimSpace(te.run("docker", "images", "--filter", "reference=docker.io/library/alpine", "-q")); got != "" {
		t.Fatalf("docker images --filter reference=docker.io/library/alpine: %q, dockerd matches familiar names only", got)
	}
	if got := strings.TrimSpace(te.run("docker", "image", "inspect", "-f", "{{json .RepoTags}}", "alpine:3")); !strings.Contains(got, `"alpine:3"`) || strings.Contains(got, "docker.io") {
		t.Fatalf("inspect RepoTags: %s", got)
	}
	hist := te.run("docker", "history", "--no-trunc", "--format", "{{.ID}}", "alpine:3")
	id := strings.Fields(hist)[0]
	if got := te.run("docker", "image", "inspect", "-f", "{{.Id}}", "alpine:3"); strings.TrimSpace(got) != id {
		t.Fatalf("history's first step %s is not the image %s", id, got)
	}
	contains(t, "docker rmi", te.run("docker", "rmi", "alpine:3"), "Untagged: alpine:3\n")
	contains(t, "inspect of a missing image", te.fails("docker", "image", "inspect", "alpine:3"), "No such image: alpine:3")
	contains(t, "inspect of a missing image", te.fails("docker", "image", "inspect", "nosuch"), "No such image: nosuch:latest")
}

// TestDockerImageInspectShape: image inspect answers dockerd's keys:
// Config has every key of a container's configuration, empty ones too, so
// `-f '{{.Config.User}}'` prints "" (it failed, "map has no entry for key
// User"), and Container is there before API 1.45; docker images leaves
// Containers and SharedSize uncomputed (N/A), as dockerd does at API 1.44.
func TestDockerImageInspectShape(t *testing.T) {
	te := startEngine(t)
	got := te.run("docker", "image", "inspect", "-f",
		"{{.Config.User}}|{{.Config.WorkingDir}}|{{json .Config.Entrypoint}}|{{json .Config.Volumes}}|{{.Config.Hostname}}|{{.Config.Tty}}|{{json .Config.Cmd}}|{{.Container}}",
		"localhost/busybox")
	if want := `||null|null||false|["sh"]|` + "\n"; got != want {
		t.Fatalf("image inspect: %q, want dockerd's %q", got, want)
	}
	if got := strings.TrimSpace(te.run("docker", "images", "--format", "{{.Containers}} {{.SharedSize}}", "localhost/busybox")); got != "N/A N/A" {
		t.Fatalf("docker images Containers and SharedSize: %q, want dockerd's \"N/A N/A\"", got)
	}
}

// TestDockerRmiConflictWords: docker rmi of an image in use answers 409
// in dockerd's words, which name what to do: by ID, "(must be forced)"
// for a stopped container or several names, and "(cannot be forced)" for
// a running one, where -f is refused too (it untagged every name); by the
// last name, "unable to remove repository reference". A load of an
// archive without names says "Loaded image ID:".
func TestDockerRmiConflictWords(t *testing.T) {
	te := startEngine(t)
	id := strings.TrimPrefix(strings.TrimSpace(te.run("docker", "image", "inspect", "-f", "{{.Id}}", "localhost/busybox")), "sha256:")
	short := id[:12]
	te.run("docker", "tag", "localhost/busybox", "other:1")
	contains(t, "rmi ID of a twice named image", te.fails("docker", "rmi", short),
		"conflict: unable to delete "+short+" (must be forced) - image is referenced in multiple repositories")
	te.run("docker", "rmi", "other:1")

	stopped := strings.TrimSpace(te.run("docker", "create", "localhost/busybox", "true"))
	contains(t, "rmi ID used by a stopped container", te.fails("docker", "rmi", short),
		"conflict: unable to delete "+short+" (must be forced) - image is being used by stopped container "+stopped[:12])
	contains(t, "rmi name used by a container", te.fails("docker", "rmi", "localhost/busybox"),
		`conflict: unable to remove repository reference "localhost/busybox" (must force) - container `+stopped[:12]+" is using its referenced image "+short)
	te.run("docker", "rm", stopped)

	running := strings.TrimSpace(te.run("docker", "run", "-d", "localhost/busybox", "sleep", "300"))
	for _, args := range [][]string{{"rmi", short}, {"rmi", "-f", short}} {
		contains(t, strings.Join(args, " "), te.fails("docker", args...),
			"conflict: unable to delete "+short+" (cannot be forced) - image is being used by running container "+running[:12])
	}
	if got := strings.TrimSpace(te.run("docker", "image", "inspect", "-f", "{{json .RepoTags}}", short)); got != `["localhost/busybox:latest"]` {
		t.Fatalf("a refused rmi -f changed the image's names: %s", got)
	}
	te.run("docker", "rm", "-f", running)

	archive := filepath.Join(t.TempDir(), "byid.tar")
	te.run("docker", "save", "-o", archive, short)
	te.run("docker", "rmi", "localhost/busybox")
	data, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	contains(t, "load of an archive without names", te.runIn(bytes.NewBuffer(data), "docker", "load"), "Loaded image ID: sha256:"+id)
}

// TestDockerShortNamesOnDockerHub: a name without a registry that a Docker
// client stores (docker load of an archive naming "NAME:TAG", build -t,
// import) is on Docker Hub, as dockerd stores it: docker images shows it
// short, the libpod API docker.io/library/NAME. Before, load, build and
// import put it under localhost/ (Podman's rule) while tag and commit
// did not; an archive from dockerd loaded as localhost/NAME.
func TestDockerShortNamesOnDockerHub(t *testing.T) {
	te := startEngine(t)
	te.run("docker", "tag", "localhost/busybox:latest", "shortload:3")
	archive := filepath.Join(te.Dir, "short.tar")
	te.run("docker", "save", "-o", archive, "shortload:3")
	te.run("docker", "rmi", "shortload:3")
	if out := te.run("docker", "load", "-i", archive); !strings.Contains(out, "Loaded image: shortload:3") {
		t.Fatalf("docker load: %s", out)
	}
	ctx := filepath.Join(te.Dir, "ctx")
	os.MkdirAll(ctx, 0o755)
	os.WriteFile(filepath.Join(ctx, "Dockerfile"), []byte("FROM localhost/busybox:latest\nCMD [\"true\"]\n"), 0o644)
	te.run("docker", "build", "-q", "-t", "shortbuilt", ctx)
	rootfs := filepath.Join(te.Dir, "rootfs.tar")
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	tw.WriteHeader(&tar.Header{Name: "f", Mode: 0o644, Size: 2, Typeflag: tar.TypeReg})
	tw.Write([]byte("hi"))
	tw.Close()
	os.WriteFile(rootfs, tb.Bytes(), 0o644)
	te.run("docker", "import", rootfs, "shortimported:1")
	shown := te.run("docker", "images", "--format", "{{.Repository}}:{{.Tag}}")
	for _, want := range []string{"shortload:3", "shortbuilt:latest", "shortimported:1"} {
		if !strings.Contains("\n"+shown, "\n"+want+"\n") {
			t.Errorf("docker images lacks %s:\n%s", want, shown)
		}
	}
	if strings.Contains(shown, "localhost/short") {
		t.Errorf("a short name under localhost/:\n%s", shown)
	}
	var libpod []struct{ Names []string }
	te.Decode(te.Must(http.StatusOK, "GET", "/images/json", nil), &libpod)
	var all []string
	for _, i := range libpod {
		all = append(all, i.Names...)
	}
	for _, want := range []string{"docker.io/library/shortload:3", "docker.io/library/shortbuilt:latest", "docker.io/library/shortimported:1"} {
		if !slices.Contains(all, want) {
			t.Errorf("libpod's images lack %s: %q", want, all)
		}
	}
	te.run("docker", "run", "--rm", "shortload:3", "true")
}

// TestDockerBuildQuietPrintsTheID: docker build -q prints the image's ID
// alone, as with dockerd, so IMG=$(docker build -q .) can be run. Before,
// it printed "Successfully built SHORTID".
func TestDockerBuildQuietPrintsTheID(t *testing.T) {
	te := startEngine(t)
	ctx := filepath.Join(te.Dir, "ctx")
	os.MkdirAll(ctx, 0o755)
	os.WriteFile(filepath.Join(ctx, "Dockerfile"), []byte("FROM localhost/busybox:latest\nCMD [\"echo\", \"built\"]\n"), 0o644)
	id := strings.TrimSpace(te.run("docker", "build", "-q", ctx))
	if len(id) != len("sha256:")+64 || !strings.HasPrefix(id, "sha256:") {
		t.Fatalf("docker build -q printed %q, want sha256:ID", id)
	}
	if out := te.run("docker", "run", "--rm", id); strings.TrimSpace(out) != "built" {
		t.Fatalf("docker run of the quiet build's ID: %q", out)
	}
}

// TestDockerRmiListsDeletedLayers: docker rmi of an image's last name
// lists the image and then the layers that went with it, as dockerd does
// (it listed the image alone). The busybox image has one layer, whose
// storage ID is its diff ID, as its chain ID is dockerd's.
func TestDockerRmiListsDeletedLayers(t *testing.T) {
	te := startEngine(t)
	te.run("docker", "tag", "localhost/busybox:latest", "gone:1")
	id := strings.TrimSpace(te.run("docker", "image", "inspect", "-f", "{{.Id}}", "gone:1"))
	layer := strings.TrimSpace(te.run("docker", "image", "inspect", "-f", "{{index .RootFS.Layers 0}}", "gone:1"))
	layerDir := filepath.Join(te.Dir, "root", "storage", "overlay", strings.TrimPrefix(layer, "sha256:"))
	if _, err := os.Stat(layerDir); err != nil {
		t.Fatalf("the layer's directory before rmi: %v", err)
	}
	out := te.run("docker", "rmi", "localhost/busybox:latest", "gone:1")
	want := "Untagged: localhost/busybox:latest\nUntagged: gone:1\nDeleted: " + id + "\nDeleted: " + layer + "\n"
	if out != want {
		t.Fatalf("docker rmi:\n%s\nwant\n%s", out, want)
	}
	if _, err := os.Stat(layerDir); !os.IsNotExist(err) {
		t.Fatalf("the layer's directory is still there: %v", err)
	}
}
