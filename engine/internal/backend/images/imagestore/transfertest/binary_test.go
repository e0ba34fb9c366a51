package transfertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/images/imagestore"
	"github.com/berth-project/berth/engine/internal/backend/images/imagestore/registrytest"
	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/testimage"
)

// startEngine starts berth-engine (the binary enginetest builds once) as
// a process of its own, without an image, logging warnings.
func startEngine(t testing.TB) *enginetest.Process {
	t.Helper()
	return enginetest.StartProcess(t, enginetest.Options{What: "transfer tests", NoImage: true, Args: []string{"--log-level", "warn"}})
}

// verifyRoot opens a stopped engine's store directly: it must check clean,
// and every image must have all its layers.
func verifyRoot(t testing.TB, root string) snapshot {
	t.Helper()
	store, err := imagestore.Open(imagestore.Options{Root: filepath.Join(root, "root"), RunRoot: filepath.Join(root, "run")})
	if err != nil {
		t.Fatalf("reopen store: %v", err)
	}
	defer store.Shutdown()
	st := store.Storage()
	checkStore(t, st)
	images, err := st.Images()
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range images {
		for id := img.TopLayer; id != ""; {
			l, err := st.Layer(id)
			if err != nil {
				t.Errorf("image %s misses layer %s: %v", img.ID, id, err)
				break
			}
			id = l.Parent
		}
	}
	return storeSnapshot(t, st)
}

// TestKill9DuringLoadAndPull kills the real engine at several points of a
// big load and of a big pull, restarts it on the same root each time, and
// checks that the store is consistent, holds no partial image and no orphaned
// layer, and that the interrupted transfer then succeeds.
func TestKill9DuringLoadAndPull(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the engine binary")
	}
	requireBusybox(t)
	reg := registrytest.Start(t, registrytest.Options{})
	big := withLayer(withLayer(testimage.Busybox("localhost/crash:1", "true"), testimage.RandomLayer(8<<20, 11)), testimage.RandomLayer(64<<20, 12))
	archivePath := filepath.Join(t.TempDir(), "big.tar")
	if err := testimage.WriteFile(archivePath, testimage.Docker, big); err != nil {
		t.Fatal(err)
	}
	src := newEnv(t)
	if _, err := src.transfer.LoadFile(context.Background(), archivePath); err != nil {
		t.Fatal(err)
	}
	ref := reg.Host + "/crash:1"
	if _, err := src.transfer.Push(context.Background(), "localhost/crash:1", pushTo(ref)); err != nil {
		t.Fatal(err)
	}

	// Each round starts the engine on the same directory.
	p := startEngine(t)
	root := p.Dir
	p.Stop()
	load := func(ctx context.Context, p *enginetest.Process) error {
		f, err := os.Open(archivePath)
		if err != nil {
			return err
		}
		defer f.Close()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.Base()+"/libpod/images/load", f)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("load: %d %s", resp.StatusCode, body)
		}
		return nil
	}
	pull := func(ctx context.Context, p *enginetest.Process) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.Base()+"/libpod/images/pull?tlsVerify=false&reference="+url.QueryEscape(ref), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || bytes.Contains(body, []byte(`"error"`)) {
			return fmt.Errorf("pull: %d %s", resp.StatusCode, body)
		}
		return nil
	}

	for _, op := range []struct {
		name  string
		run   func(context.Context, *enginetest.Process) error
		image string
	}{{"load", load, "localhost/crash:1"}, {"pull", pull, ref}} {
		// Time one complete run, then kill at fractions of it.
		p.Start()
		start := time.Now()
		if err := op.run(opContext(t), p); err != nil {
			t.Fatalf("%s: %v\n%s", op.name, err, p.Log())
		}
		full := time.Since(start)
		p.Stop()
		removeAll(t, root)
		for _, frac := range []float64{0.1, 0.35, 0.7} {
			p.Start()
			done := make(chan error, 1)
			go func() { done <- op.run(opContext(t), p) }()
			time.Sleep(time.Duration(float64(full) * frac))
			p.Kill9()
			<-done
			// A restart repairs and sweeps what the kill left: either the
			// image is complete or nothing of it remains.
			p.Start()
			p.Stop()
			snap := verifyRoot(t, root)
			switch {
			case len(snap.Images) == 0 && len(snap.Layers) == 0:
			case len(snap.Images) == 1 && len(snap.Layers) == 3:
				t.Logf("%s killed at %.0f%%: the image was already complete", op.name, frac*100)
			default:
				t.Errorf("%s killed at %.0f%%, after restart: %s", op.name, frac*100, snap)
			}
			// The restarted engine sweeps what the kill left and the transfer works.
			p.Start()
			if err := op.run(opContext(t), p); err != nil {
				t.Fatalf("%s after a kill at %.0f%%: %v\n%s", op.name, frac*100, err, p.Log())
			}
			if status := exists(t, p, op.image); status != http.StatusNoContent {
				t.Errorf("%s: image %s missing after the retry (%d)", op.name, op.image, status)
			}
			p.Stop()
			snap = verifyRoot(t, root)
			if len(snap.Images) != 1 {
				t.Errorf("%s after a kill at %.0f%%: images %v, want exactly one", op.name, frac*100, snap.Images)
			}
			if len(snap.Layers) != 3 {
				t.Errorf("%s after a kill at %.0f%%: layers %v, want the image's 3 (no orphans)", op.name, frac*100, snap.Layers)
			}
			removeAll(t, root)
		}
	}
}

// opContext bounds one transfer of the kill test, so that a stuck engine
// fails the test instead of running into the package timeout.
func opContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// removeAll empties an engine root so the next round starts fresh.
func removeAll(t testing.TB, root string) {
	t.Helper()
	store, err := imagestore.Open(imagestore.Options{Root: filepath.Join(root, "root"), RunRoot: filepath.Join(root, "run")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Storage().Shutdown(true); err != nil {
		t.Fatal(err)
	}
	enginetest.UnmountUnder(root, 1)
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(root, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
}

func exists(t testing.TB, p *enginetest.Process, name string) int {
	t.Helper()
	resp, err := http.Get(p.Base() + "/libpod/images/" + url.PathEscape(name) + "/exists")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// podman runs Podman's remote client against an engine.
func podman(t testing.TB, p *enginetest.Process, args ...string) (string, error) {
	t.Helper()
	full := append([]string{"--remote", "--url", "tcp://" + p.Addr}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "podman", full...)
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	return out.String(), err
}

// TestPodmanRemoteClient drives the transfer routes with Podman 4.3.1's
// remote client, as a user would.
func TestPodmanRemoteClient(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the engine binary")
	}
	enginetest.RequirePodman(t)
	requireBusybox(t)
	reg := registrytest.Start(t, registrytest.Options{})
	p := startEngine(t)
	dir := t.TempDir()

	archivePath := filepath.Join(dir, "in.tar")
	if err := testimage.WriteFile(archivePath, testimage.Docker, testimage.Busybox("localhost/cli:1", "echo", "hi")); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		out, err := podman(t, p, args...)
		if err != nil {
			t.Fatalf("podman %s: %v\n%s\nengine log:\n%s", strings.Join(args, " "), err, out, p.Log())
		}
		return out
	}
	if out := run("load", "-i", archivePath); !strings.Contains(out, "localhost/cli:1") {
		t.Errorf("podman load: %q", out)
	}
	ref := reg.Host + "/cli/app:1"
	run("push", "--tls-verify=false", "localhost/cli:1", ref)
	out := run("pull", "--tls-verify=false", ref)
	img, err := inspectID(p, "localhost/cli:1")
	if err != nil || !strings.Contains(out, img) {
		t.Errorf("podman pull printed %q, want the image ID %s (%v)", out, img, err)
	}
	if out, err := podman(t, p, "pull", "--tls-verify=false", reg.Host+"/cli/none:1"); err == nil {
		t.Errorf("pull of a missing image succeeded: %s", out)
	}
	if out, err := podman(t, p, "pull", "oci-archive:/tmp/x.tar"); err == nil {
		t.Errorf("pull of another transport succeeded: %s", out)
	}

	for _, format := range []string{"docker-archive", "oci-archive"} {
		saved := filepath.Join(dir, format+".tar")
		run("save", "--format", format, "-o", saved, "localhost/cli:1")
		names, err := newEnv(t).transfer.LoadFile(context.Background(), saved)
		if err != nil || len(names) != 1 || names[0] != "localhost/cli:1" {
			t.Errorf("podman save --format %s wrote an archive that loads as %v, %v", format, names, err)
		}
	}
	multi := filepath.Join(dir, "multi.tar")
	run("tag", "localhost/cli:1", "localhost/cli:2")
	run("save", "-m", "-o", multi, "localhost/cli:1", "localhost/cli:2")
	if names, err := newEnv(t).transfer.LoadFile(context.Background(), multi); err != nil || len(names) != 2 {
		t.Errorf("podman save -m: %v %v", names, err)
	}

	rootfsPath := filepath.Join(dir, "rootfs.tar")
	if err := os.WriteFile(rootfsPath, rootfs(t), 0o644); err != nil {
		t.Fatal(err)
	}
	out = run("import", "--change", "CMD=/bin/app", "--change", "ENV=A=1", "--message", "hello", rootfsPath, "localhost/imported:1")
	if !strings.Contains(out, "sha256:") && len(strings.TrimSpace(out)) < 12 {
		t.Errorf("podman import printed %q", out)
	}
	var cfg struct {
		Config struct {
			Cmd []string
			Env []string
		}
	}
	if err := getJSON(p.Base()+"/libpod/images/localhost%2Fimported:1/json", &cfg); err != nil || len(cfg.Config.Cmd) == 0 {
		t.Errorf("imported image config %+v, %v", cfg, err)
	}

	other := startEngine(t)
	out = run("image", "scp", "localhost/cli:1", "tcp://"+other.Addr+"::")
	if !strings.Contains(out, "localhost/cli:1") {
		t.Errorf("podman image scp printed %q", out)
	}
	if status := exists(t, other, "localhost/cli:1"); status != http.StatusNoContent {
		t.Errorf("scp target lacks the image: %d", status)
	}
	p.Stop()
	verifyRoot(t, p.Dir)
}

func inspectID(p *enginetest.Process, name string) (string, error) {
	var img struct{ Id string }
	err := getJSON(p.Base()+"/libpod/images/"+url.PathEscape(name)+"/json", &img)
	return img.Id, err
}

func getJSON(rawURL string, v any) error {
	resp, err := http.Get(rawURL)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %d %s", rawURL, resp.StatusCode, body)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
