// Package registrytest starts a real distribution registry (Debian's
// docker-registry) on 127.0.0.1 for tests of pull, push and scp. Each
// registry gets a free port, its own configuration and storage directory,
// and is stopped when the test ends.
package registrytest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/berth-project/berth/shared/syncbuf"
)

// Binary is where Debian installs the distribution registry.
const Binary = "/usr/bin/docker-registry"

// Options configure a registry.
type Options struct {
	// Username and Password, when Username is set, turn on htpasswd
	// authentication with this one account.
	Username string
	Password string
}

// Registry is a running docker-registry process.
type Registry struct {
	// Host is host:port, the form used in image references
	// (for example Host+"/busybox:latest").
	Host string
	// Dir holds the configuration, the storage and the log.
	Dir string

	cmd  *exec.Cmd
	done chan struct{}
	log  *syncbuf.Buffer
}

// Require reports whether the registry binary exists. When it does not, the
// test fails under BERTH_TEST_STRICT=1 and is skipped otherwise.
func Require(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(Binary); err == nil {
		return
	}
	if os.Getenv("BERTH_TEST_STRICT") == "1" {
		t.Fatalf("%s is missing (BERTH_TEST_STRICT=1): install the docker-registry package", Binary)
	}
	t.Skipf("%s is missing: install the docker-registry package to run this test", Binary)
}

// Start runs a registry for the duration of the test. It fails the test if
// the registry does not answer within 20 seconds.
func Start(t testing.TB, opts Options) *Registry {
	t.Helper()
	Require(t)
	dir := t.TempDir()
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		r, err := start(dir, opts)
		if err == nil {
			t.Cleanup(r.Stop)
			return r
		}
		lastErr = err
	}
	t.Fatalf("starting docker-registry: %v", lastErr)
	return nil
}

func start(dir string, opts Options) (*Registry, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	host := fmt.Sprintf("127.0.0.1:%d", port)
	storage := filepath.Join(dir, "storage")
	if err := os.MkdirAll(storage, 0o755); err != nil {
		return nil, err
	}
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\n")
	fmt.Fprintf(&cfg, "storage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\n", storage)
	fmt.Fprintf(&cfg, "http:\n  addr: %s\n", host)
	if opts.Username != "" {
		hash, err := bcrypt.GenerateFromPassword([]byte(opts.Password), bcrypt.MinCost)
		if err != nil {
			return nil, err
		}
		htpasswd := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(htpasswd, []byte(opts.Username+":"+string(hash)+"\n"), 0o600); err != nil {
			return nil, err
		}
		fmt.Fprintf(&cfg, "auth:\n  htpasswd:\n    realm: berth-test\n    path: %s\n", htpasswd)
	}
	cfgPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o600); err != nil {
		return nil, err
	}

	r := &Registry{Host: host, Dir: dir, done: make(chan struct{}), log: &syncbuf.Buffer{}}
	r.cmd = exec.Command(Binary, "serve", cfgPath)
	r.cmd.Stdout = r.log
	r.cmd.Stderr = r.log
	if err := r.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		_ = r.cmd.Wait()
		close(r.done)
	}()
	if err := r.waitReady(20 * time.Second); err != nil {
		r.Stop()
		return nil, fmt.Errorf("%w; registry log:\n%s", err, r.log.String())
	}
	return r, nil
}

func (r *Registry) waitReady(limit time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-r.done:
			return errors.New("docker-registry exited before answering")
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.Host+"/v2/", nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("docker-registry on %s did not answer /v2/ in %s", r.Host, limit)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop ends the registry process and waits for it. It is safe to call more
// than once.
func (r *Registry) Stop() {
	select {
	case <-r.done:
		return
	default:
	}
	_ = r.cmd.Process.Kill()
	<-r.done
}

// Log returns what the registry printed so far, for failure messages.
func (r *Registry) Log() string { return r.log.String() }

// ClosedAddr returns a 127.0.0.1 host:port on which nothing listens, for
// tests of an unreachable registry.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
