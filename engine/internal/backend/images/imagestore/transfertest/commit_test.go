package transfertest

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/containers/storage"
	storagearchive "github.com/containers/storage/pkg/archive"

	"github.com/berth-project/berth/engine/internal/backend/images/imagestore"
	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/testsupport/tartest"
)

// layerTar is a layer diff: /hello added, /bin/echo deleted (a whiteout).
func layerTar(t testing.TB) []byte {
	t.Helper()
	return tartest.Of(t, "hello", "hello\n", "bin/", "", "bin/.wh.echo", "")
}

// layerFiles lists the paths in the diff of a storage layer.
func layerFiles(t testing.TB, st storage.Store, layerID string) []string {
	t.Helper()
	uncompressed := storagearchive.Uncompressed
	rc, err := st.Diff("", layerID, &storage.DiffOptions{Compression: &uncompressed})
	if err != nil {
		t.Fatalf("diff of %s: %v", layerID, err)
	}
	defer rc.Close()
	var names []string
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, strings.TrimPrefix(strings.TrimPrefix(h.Name, "./"), "/"))
	}
}

func TestCommitAddsALayerAndConfiguration(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	parentID := e.load(t, "base:1")
	parent, err := e.store.Lookup(ctx, parentID)
	if err != nil {
		t.Fatal(err)
	}
	id, err := e.transfer.Commit(ctx, imagestore.CommitOptions{
		Parent:    parentID,
		Layer:     bytes.NewReader(layerTar(t)),
		Changes:   []string{`CMD ["/bin/cat", "/hello"]`, "ENV GREETING=hi", "LABEL stage=committed", "WORKDIR /srv", "EXPOSE 8080"},
		Author:    "Berth Tester <t@example.com>",
		Comment:   "added hello",
		CreatedBy: "podman commit",
		Names:     []string{"committed:1"},
	})
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	img, err := e.store.Lookup(ctx, "localhost/committed:1")
	if err != nil {
		t.Fatalf("committed image not named: %v", err)
	}
	if img.ID != id {
		t.Errorf("commit answered %s, stored %s", id, img.ID)
	}
	cfg := img.Config.Config
	if !reflect.DeepEqual(cfg.Cmd, []string{"/bin/cat", "/hello"}) || cfg.WorkingDir != "/srv" ||
		!slices.Contains(cfg.Env, "GREETING=hi") || cfg.Labels["stage"] != "committed" {
		t.Errorf("configuration %+v", cfg)
	}
	if _, ok := cfg.ExposedPorts["8080/tcp"]; !ok {
		t.Errorf("exposed ports %v", cfg.ExposedPorts)
	}
	if img.Config.Author != "Berth Tester <t@example.com>" {
		t.Errorf("author %q", img.Config.Author)
	}
	if img.Parent != parentID {
		t.Errorf("parent %q, want %s", img.Parent, parentID)
	}
	if len(img.Layers) != len(parent.Layers)+1 || img.Layers[1] != parent.TopLayer {
		t.Errorf("layers %v on parent %v", img.Layers, parent.Layers)
	}
	hist := img.Config.History
	if len(hist) != len(parent.Config.History)+1 {
		t.Fatalf("history %+v", hist)
	}
	last := hist[len(hist)-1]
	if last.Comment != "added hello" || last.CreatedBy != "podman commit" || last.Author != "Berth Tester <t@example.com>" || last.EmptyLayer {
		t.Errorf("history entry %+v", last)
	}
	if got := layerFiles(t, e.store.Storage(), img.TopLayer); !slices.Contains(got, "hello") || !slices.Contains(got, "bin/.wh.echo") {
		t.Errorf("new layer holds %v", got)
	}
	// The stored manifest and configuration are what copies read: the image
	// exports in both archive formats.
	for _, format := range []string{core.FormatDockerArchive, core.FormatOCIArchive} {
		rc, err := e.transfer.Export(ctx, []string{"localhost/committed:1"}, core.ExportOptions{Format: format})
		if err != nil {
			t.Fatalf("export %s: %v", format, err)
		}
		rc.Close()
	}
	checkStore(t, e.store.Storage())
}

func TestCommitFormatsAndOnBuild(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	parentID := e.load(t, "base:1")
	id, err := e.transfer.Commit(ctx, imagestore.CommitOptions{
		Parent: parentID, Layer: bytes.NewReader(layerTar(t)), Format: imagestore.FormatDocker,
		Changes: []string{"ONBUILD RUN echo child", "STOPSIGNAL SIGINT"}, Names: []string{"docker-format:1"},
	})
	if err != nil {
		t.Fatalf("docker-format commit: %v", err)
	}
	img, err := e.store.Lookup(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if img.ManifestType != "application/vnd.docker.distribution.manifest.v2+json" || img.Config.Config.StopSignal != "SIGINT" {
		t.Errorf("manifest type %s, stop signal %q", img.ManifestType, img.Config.Config.StopSignal)
	}
	// A child inherits ONBUILD from its docker-format parent.
	child, err := e.transfer.Commit(ctx, imagestore.CommitOptions{Parent: id, Format: imagestore.FormatDocker, Comment: "config only"})
	if err != nil {
		t.Fatalf("config-only commit: %v", err)
	}
	raw := configOf(t, e.store.Storage(), child)
	var cfg struct {
		Config  struct{ OnBuild []string } `json:"config"`
		History []struct {
			EmptyLayer bool `json:"empty_layer"`
			Comment    string
		} `json:"history"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.Config.OnBuild, []string{"RUN echo child"}) {
		t.Errorf("child's ONBUILD %v", cfg.Config.OnBuild)
	}
	if last := cfg.History[len(cfg.History)-1]; !last.EmptyLayer || last.Comment != "config only" {
		t.Errorf("config-only history entry %+v", last)
	}
	childImg, _ := e.store.Lookup(ctx, child)
	if childImg.TopLayer != img.TopLayer {
		t.Errorf("a config-only commit added a layer: %s over %s", childImg.TopLayer, img.TopLayer)
	}
	checkStore(t, e.store.Storage())
}

// configOf returns the raw configuration blob of an image.
func configOf(t testing.TB, st storage.Store, id string) []byte {
	t.Helper()
	img, err := st.Image(id)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := st.ImageBigData(img.ID, "sha256:"+img.ID)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestCommitSquash(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	parentID := e.load(t, "base:1")
	layersBefore := len(e.snapshot(t).Layers)
	id, err := e.transfer.Commit(ctx, imagestore.CommitOptions{Parent: parentID, Layer: bytes.NewReader(layerTar(t)), Squash: true})
	if err != nil {
		t.Fatalf("squash: %v", err)
	}
	img, err := e.store.Lookup(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(img.Layers) != 1 || len(img.Config.History) != 1 {
		t.Fatalf("squashed image has layers %v, history %+v", img.Layers, img.Config.History)
	}
	files := layerFiles(t, e.store.Storage(), img.TopLayer)
	if !slices.Contains(files, "hello") || !slices.Contains(files, "bin/busybox") || slices.Contains(files, "bin/echo") {
		t.Errorf("squashed layer holds %v", files)
	}
	if n := len(e.snapshot(t).Layers); n != layersBefore+1 {
		t.Errorf("%d layers after a squash, want %d (no scratch or intermediate layer left)", n, layersBefore+1)
	}
	checkStore(t, e.store.Storage())
}

// TestRefusedCommitsLeaveNothing: a commit with a bad layer, ONBUILD in the
// OCI format or an unknown format is a bad argument (about what the case
// names, where it names something) and leaves the store as it was.
func TestRefusedCommitsLeaveNothing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	parentID := e.load(t, "base:1")
	before := e.snapshot(t)
	for _, c := range []struct {
		name  string
		opts  imagestore.CommitOptions
		about string
	}{
		{"not a tar", imagestore.CommitOptions{Parent: parentID, Layer: bytes.NewReader(bytes.Repeat([]byte("garbage!"), 200)), Names: []string{"bad:1"}}, ""},
		{"truncated", imagestore.CommitOptions{Parent: parentID, Layer: bytes.NewReader(layerTar(t)[:515]), Names: []string{"bad:1"}}, ""},
		{"cut in its padding", imagestore.CommitOptions{Parent: parentID, Layer: bytes.NewReader(layerTar(t)[:700]), Names: []string{"bad:1"}}, ""},
		{"ONBUILD in the oci format", imagestore.CommitOptions{Parent: parentID, Layer: bytes.NewReader(layerTar(t)), Changes: []string{"ONBUILD RUN true"}}, "changes"},
		{"unknown format", imagestore.CommitOptions{Parent: parentID, Format: "v2s1"}, "format"},
	} {
		_, err := e.transfer.Commit(ctx, c.opts)
		if !errors.Is(err, core.ErrInvalidArgument) || !strings.Contains(err.Error(), c.about) {
			t.Errorf("%s: %v, want a bad argument about %q", c.name, err, c.about)
		}
		if after := e.snapshot(t); !reflect.DeepEqual(before, after) {
			t.Errorf("%s: the store changed:\n%v\n%v", c.name, before, after)
		}
	}
	if _, err := e.transfer.Commit(ctx, imagestore.CommitOptions{Parent: "nosuchimage"}); !errors.Is(err, core.ErrNoSuchImage) {
		t.Errorf("unknown parent: %v", err)
	}
	checkStore(t, e.store.Storage())
}
