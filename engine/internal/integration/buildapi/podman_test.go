package buildapi

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// podman runs podman --remote against the engine.
func podman(t *testing.T, e *testEngine, dir string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "podman", append([]string{"--remote", "--url", e.tcpURL()}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestPodmanRemoteBuild(t *testing.T) {
	if _, err := exec.LookPath("podman"); err != nil {
		if os.Getenv("BERTH_TEST_STRICT") == "1" {
			t.Fatal("podman is required (BERTH_TEST_STRICT=1)")
		}
		t.Skip("podman not installed")
	}
	e := startEngine(t)
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("Build.file", `FROM localhost/busybox AS base
ARG WHO=nobody
RUN echo "built for $WHO" > /who
FROM base AS final
COPY msg.txt /msg.txt
CMD ["sh", "-c", "cat /who /msg.txt"]
`)
	write("msg.txt", "from the context\n")
	write("secret.txt", "never copied\n")
	write(".containerignore", "secret.txt\n")

	out, err := podman(t, e, dir, "build", "-t", "pb:1", "-f", "Build.file", "--build-arg", "WHO=podman", "--label", "via=podman", "--layers", ".")
	if err != nil || !strings.Contains(out, "Successfully tagged localhost/pb:1") {
		t.Fatalf("podman build: %v\n%s", err, out)
	}
	out, err = podman(t, e, dir, "run", "--rm", "--network", "none", "pb:1")
	if err != nil || !strings.Contains(out, "built for podman") || !strings.Contains(out, "from the context") {
		t.Fatalf("podman run of the built image: %v\n%s", err, out)
	}
	out, err = podman(t, e, dir, "image", "inspect", "--format", "{{index .Labels \"via\"}}", "pb:1")
	if err != nil || strings.TrimSpace(out) != "podman" {
		t.Fatalf("label: %v %q", err, out)
	}
	// Cached rebuild, quiet: only the ID.
	out, err = podman(t, e, dir, "build", "-q", "-t", "pb:1", "-f", "Build.file", "--build-arg", "WHO=podman", "--label", "via=podman", "--layers", ".")
	id := strings.TrimSpace(out)
	if err != nil || len(id) != 64 || strings.Contains(out, "STEP") {
		t.Fatalf("podman build -q: %v\n%s", err, out)
	}
	out, err = podman(t, e, dir, "build", "--no-cache", "--target", "base", "-t", "pb:base", "-f", "Build.file", ".")
	if err != nil || strings.Contains(out, "Using cache") || strings.Contains(out, "msg.txt") {
		t.Fatalf("podman build --no-cache --target base: %v\n%s", err, out)
	}
	out, err = podman(t, e, dir, "run", "--rm", "--network", "none", "pb:base", "cat", "/who")
	if err != nil || !strings.Contains(out, "built for nobody") {
		t.Fatalf("run of the target stage: %v\n%s", err, out)
	}
	write("Fail.file", "FROM localhost/busybox\nRUN echo about-to-fail && exit 3\n")
	out, err = podman(t, e, dir, "build", "-f", "Fail.file", ".")
	var exit *exec.ExitError
	if err == nil || !strings.Contains(out, "about-to-fail") || !strings.Contains(out, "exit status 3") {
		t.Fatalf("failing build: %v\n%s", err, out)
	}
	if errors.As(err, &exit) && exit.ExitCode() != 3 {
		t.Fatalf("podman exited %d, want the RUN's 3", exit.ExitCode())
	}
	write("Ign.file", "FROM localhost/busybox\nCOPY secret.txt /\n")
	if out, err = podman(t, e, dir, "build", "-f", "Ign.file", "."); err == nil {
		t.Fatalf("a file in .containerignore was copied:\n%s", out)
	}
}
