package engineclient

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/shared/auth/authtest"
	"github.com/berth-project/berth/shared/testnet"
)

// engineBinary builds berth-engine from this workspace, or skips (fails
// under BERTH_TEST_STRICT=1) where the engine cannot run: it needs root.
func engineBinary(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("BERTH_TEST_STRICT") == "1" {
			t.Fatal("the engine needs root (BERTH_TEST_STRICT=1)")
		}
		t.Skip("the engine needs root")
	}
	if bin := os.Getenv("BERTH_ENGINE_BIN"); bin != "" {
		return bin // built once by make test (hack/test.sh)
	}
	bin := filepath.Join(t.TempDir(), "berth-engine")
	build := exec.Command("go", "build", "-o", bin, "./cmd/berth-engine")
	build.Dir = filepath.Join("..", "..", "engine")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building berth-engine: %v\n%s", err, out)
	}
	return bin
}

// TestRealEngineWithTLSAndToken runs berth-engine with mutual TLS and bearer
// tokens and reaches it as uploads does: with the client certificate, with
// the token, and without either (401, not retried).
func TestRealEngineWithTLSAndToken(t *testing.T) {
	bin := engineBinary(t)
	certs := authtest.Certs(t)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("uploads-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testnet.FreeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	engine := exec.CommandContext(ctx, bin, "--listen", "tcp://"+addr, "--root", filepath.Join(dir, "root"),
		"--runroot", filepath.Join(dir, "run"), "--storage-driver", "vfs", "--network-default-mode", "private",
		"--tls-cert", certs.ServerCert, "--tls-key", certs.ServerKey, "--tls-client-ca", certs.CA, "--tokens-file", tokens)
	var log strings.Builder
	engine.Stderr = &log
	if err := engine.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		engine.Process.Signal(os.Interrupt)
		engine.Wait()
	}()

	withCert := newTestClient(t, "https://"+addr, func(c *Config) {
		c.CAFile, c.CertFile, c.KeyFile = certs.CA, certs.ClientCert, certs.ClientKey
		c.Attempts, c.Backoff, c.Timeout = 60, 250*time.Millisecond, time.Minute
	})
	if _, err := withCert.Ping(ctx); err != nil {
		t.Fatalf("ping with the client certificate: %v\n%s", err, log.String())
	}
	if exists, err := withCert.ImageExists(ctx, "localhost/no-such-image:1"); err != nil || exists {
		t.Errorf("image exists with the client certificate: %v %v", exists, err)
	}
	withToken := newTestClient(t, "https://"+addr, func(c *Config) { c.CAFile, c.Token = certs.CA, "uploads-token" })
	if _, err := withToken.Ping(ctx); err != nil {
		t.Errorf("ping with the token: %v", err)
	}
	checkDeployCalls(ctx, t, withToken)
	for name, c := range map[string]*Client{
		"neither":     newTestClient(t, "https://"+addr, func(c *Config) { c.CAFile = certs.CA }),
		"wrong token": newTestClient(t, "https://"+addr, func(c *Config) { c.CAFile, c.Token = certs.CA, "guess" }),
	} {
		var apiErr *Error
		if _, err := c.Ping(ctx); !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnauthorized {
			t.Errorf("%s: %v, want 401", name, err)
		}
	}
	if _, err := newTestClient(t, "https://"+addr).Ping(ctx); err == nil {
		t.Error("a client without the engine's CA reached it")
	}
}

func TestTLSOptionsNeedHTTPS(t *testing.T) {
	for _, url := range []string{"tcp://127.0.0.1:1", "http://127.0.0.1:1", "unix:///tmp/s.sock"} {
		if _, err := New(Config{URL: url, CAFile: "ca.pem"}); err == nil {
			t.Errorf("%s with a CA file accepted", url)
		}
	}
	if _, err := New(Config{URL: "https://127.0.0.1:1", CertFile: "c.pem"}); err == nil {
		t.Error("a client certificate without its key accepted")
	}
}

// checkDeployCalls installs an activated quadlet unit (a volume: nothing to pull or run)
// and one the engine refuses, and plays YAML the engine refuses, as the uploads deployer
// sends them.
func checkDeployCalls(ctx context.Context, t *testing.T, c *Client) {
	t.Helper()
	opts := QuadletInstallOptions{Replace: true, Activate: true}
	unitTar := func(name, unit string) Opener {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(unit))}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write([]byte(unit))
		_ = tw.Close()
		return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil }
	}
	for round := 1; round <= 2; round++ { // the second install replaces the first
		report, err := c.InstallQuadlets(ctx, unitTar("uploads-data.volume", "[Volume]\n"), opts)
		if err != nil || report.Installed["uploads-data.volume"] == "" {
			t.Errorf("install %d of a volume unit: %+v, %v", round, report, err)
		}
	}
	_, err := c.InstallQuadlets(ctx, unitTar("bad.container", "[Container]\nImage=x\nImagee=y\n"), opts)
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest || !strings.Contains(apiErr.Message, "Imagee") {
		t.Errorf("install of a unit with an unknown key: %v, want 400 naming the key", err)
	}
	_, err = c.KubePlay(ctx, func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("kind: Pod\nmetadata: [\n")), nil }, KubePlayOptions{Replace: true})
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest || apiErr.Message == "" {
		t.Errorf("kube play of YAML that does not parse: %v, want 400 with the engine's message", err)
	}
}
