package imagesapi

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/images/imagestore/registrytest"
	"github.com/berth-project/berth/engine/internal/testsupport/need"
	"github.com/berth-project/berth/engine/testimage"
)

// podmanClient runs podman --remote against an engine.
type podmanClient struct {
	t      *testing.T
	binary string
	url    string
}

func newPodman(t *testing.T, e *testEngine) *podmanClient {
	t.Helper()
	return &podmanClient{t: t, binary: need.Program(t, "image tests", "podman"), url: e.tcpURL()}
}

// startWithRegistry starts an engine with busybox loaded as image, a podman
// 4.3.1 client of it and a plain-HTTP registry: the setting of the tests
// that push to a registry and pull back.
func startWithRegistry(t *testing.T, image string) (*testEngine, *podmanClient, *registrytest.Registry) {
	t.Helper()
	e := startEngine(t)
	p := newPodman(t, e)
	reg := registrytest.Start(t, registrytest.Options{})
	e.load(testimage.Busybox(image))
	return e, p, reg
}

// run runs podman --remote with args and returns stdout; a failure fails the test.
func (p *podmanClient) run(args ...string) string {
	p.t.Helper()
	out, errOut, err := p.try(args...)
	if err != nil {
		p.t.Fatalf("podman %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// try runs podman --remote and returns stdout, stderr and the error.
func (p *podmanClient) try(args ...string) (string, string, error) {
	p.t.Helper()
	full := append([]string{"--remote", "--url", p.url}, args...)
	cmd := exec.CommandContext(withTimeout(p.t, 60*time.Second), p.binary, full...)
	cmd.Env = append(os.Environ(), "CONTAINERS_CONF=/dev/null", "XDG_CONFIG_HOME="+p.t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

func TestPodmanRemoteSystem(t *testing.T) {
	e := startEngine(t)
	p := newPodman(t, e)
	version := p.run("version", "--format", "{{.Server.APIVersion}} {{.Server.Version}} {{.Server.OsArch}}")
	if !strings.HasPrefix(version, "5.7.0 5.7.0 linux/") {
		t.Errorf("podman version: %q", version)
	}
	var info struct {
		Store struct {
			GraphRoot       string `json:"graphRoot"`
			GraphDriverName string `json:"graphDriverName"`
		} `json:"store"`
		Host struct {
			OCIRuntime struct{ Name string } `json:"ociRuntime"`
		} `json:"host"`
	}
	if err := json.Unmarshal([]byte(p.run("info", "--format", "json")), &info); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(info.Store.GraphRoot, "/storage") || info.Store.GraphDriverName == "" || info.Host.OCIRuntime.Name != "runc" {
		t.Errorf("podman info: %+v", info)
	}
}

func TestPodmanRemoteImages(t *testing.T) {
	e := startEngine(t)
	p := newPodman(t, e)
	archive := filepath.Join(t.TempDir(), "images.tar")
	if err := testimage.WriteFile(archive, testimage.Docker,
		testimage.Image{RepoTags: []string{"localhost/podman-a:1"}, Config: testimage.Config{Cmd: []string{"sh"}, Labels: map[string]string{"app": "a"}}},
		testimage.Image{RepoTags: []string{"localhost/podman-b:1"}, Layers: []testimage.Layer{{Files: []testimage.File{{Path: "b", Data: []byte("b")}}}}},
	); err != nil {
		t.Fatal(err)
	}
	p.run("load", "-i", archive)

	images := p.run("images", "--format", "{{.Repository}}:{{.Tag}}")
	if !strings.Contains(images, "localhost/podman-a:1") || !strings.Contains(images, "localhost/podman-b:1") {
		t.Fatalf("podman images:\n%s", images)
	}
	for _, filter := range []string{"label=app", "label=app=a", "reference=podman-a"} {
		filtered := p.run("images", "--filter", filter, "--format", "{{.Repository}}")
		if strings.TrimSpace(filtered) != "localhost/podman-a" {
			t.Errorf("podman images --filter %s: %q", filter, filtered)
		}
	}
	if none := p.run("images", "--filter", "label=app=b", "--format", "{{.Repository}}"); strings.TrimSpace(none) != "" {
		t.Errorf("podman images --filter label=app=b: %q", none)
	}
	inspect := p.run("image", "inspect", "--format", "{{.Config.Labels}} {{.Os}} {{index .RepoTags 0}}", "podman-a:1")
	if strings.TrimSpace(inspect) != "map[app:a] linux localhost/podman-a:1" {
		t.Errorf("podman image inspect: %q", inspect)
	}

	p.run("tag", "podman-a:1", "renamed:7")
	p.run("image", "exists", "localhost/renamed:7")
	if _, _, err := p.try("image", "exists", "nothing-here"); err == nil {
		t.Error("podman image exists succeeded for a missing image")
	}
	p.run("untag", "podman-a:1", "localhost/renamed:7")
	if _, _, err := p.try("image", "exists", "localhost/renamed:7"); err == nil {
		t.Error("untagged name still exists")
	}

	tree := p.run("image", "tree", "podman-b:1")
	if !strings.Contains(tree, "Image Layers") || strings.Count(tree, "── ID: ") != 2 {
		t.Errorf("podman image tree:\n%s", tree)
	}
	history := p.run("history", "--format", "{{.CreatedBy}}", "podman-b:1")
	if !strings.Contains(history, "testimage busybox base") {
		t.Errorf("podman history:\n%s", history)
	}

	out := p.run("rmi", "podman-b:1")
	if !strings.Contains(out, "Untagged: localhost/podman-b:1") || !strings.Contains(out, "Deleted: ") {
		t.Errorf("podman rmi: %q", out)
	}
	if _, errOut, err := p.try("rmi", "podman-b:1"); err == nil || !strings.Contains(errOut, "podman-b:1") {
		t.Errorf("podman rmi of a removed image: err %v, stderr %q", err, errOut)
	}

	p.run("untag", "podman-a:1")
	pruned := p.run("image", "prune", "-f")
	if len(strings.Fields(pruned)) != 1 {
		t.Errorf("podman image prune: %q", pruned)
	}
	if left := strings.TrimSpace(p.run("images", "-a", "-q")); left != "" {
		t.Errorf("images left after prune: %q", left)
	}
}
