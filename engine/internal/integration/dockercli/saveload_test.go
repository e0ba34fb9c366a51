package dockercli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDockerSaveLoadOwnImages: an image the engine built or committed,
// saved, loads back while it is still there (the engine stores its layers
// under the IDs a load gives them, so the load finds the same image) and
// after it was removed.
func TestDockerSaveLoadOwnImages(t *testing.T) {
	te := startEngine(t)
	ctx := filepath.Join(te.Dir, "sl-context")
	if err := os.MkdirAll(ctx, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ctx, "Dockerfile"), []byte("FROM localhost/busybox:latest\nRUN echo one > /one\nRUN echo two > /two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	te.run("docker", "build", "-q", "-t", "localhost/sl-built:1", ctx)
	te.run("docker", "run", "-d", "--name", "sl-ctr", "localhost/busybox:latest", "sh", "-c", "echo c > /c; exec sleep 300")
	te.run("docker", "exec", "sl-ctr", "test", "-f", "/c")
	te.run("docker", "commit", "sl-ctr", "localhost/sl-committed:1")
	for _, image := range []string{"localhost/sl-built:1", "localhost/sl-committed:1"} {
		archive := filepath.Join(te.Dir, strings.NewReplacer("/", "_", ":", "_").Replace(image)+".tar")
		te.run("docker", "save", "-o", archive, image)
		contains(t, "load while present", te.run("docker", "load", "-i", archive), "Loaded image: "+image)
		te.run("docker", "rmi", image)
		contains(t, "load after removal", te.run("docker", "load", "-i", archive), "Loaded image: "+image)
	}
	contains(t, "run the loaded build", te.run("docker", "run", "--rm", "localhost/sl-built:1", "cat", "/one", "/two"), "one\ntwo")
	contains(t, "run the loaded commit", te.run("docker", "run", "--rm", "localhost/sl-committed:1", "cat", "/c"), "c")
}
