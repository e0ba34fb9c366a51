// Package need lets a test say what it needs of the machine (root, a
// program, a file, a writable cgroup hierarchy): without it the test is
// skipped or, under BERTH_TEST_STRICT=1 (make test and CI, where
// hack/deps.sh installed everything), failed, so that nothing a CI run
// should test is skipped unseen. It imports nothing of the engine, so that
// every test, unit or integration, can use it.
package need

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Strict reports whether BERTH_TEST_STRICT=1: what a test needs must be
// there.
func Strict() bool { return os.Getenv("BERTH_TEST_STRICT") == "1" }

// Skipf skips t with the message or, under BERTH_TEST_STRICT=1, fails it.
func Skipf(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if Strict() {
		t.Fatalf("%s (BERTH_TEST_STRICT=1)", msg)
	}
	t.Skip(msg)
}

// All skips t (see Skipf) unless it has every one of needs: "root" is
// running as root, an absolute path a file that exists, any other name a
// program (see Program); what names the tests in the message ("pod tests
// need catatonit").
func All(t testing.TB, what string, needs ...string) {
	t.Helper()
	var missing []string
	for _, n := range needs {
		var ok bool
		switch {
		case n == "root":
			ok = os.Geteuid() == 0
		case filepath.IsAbs(n):
			_, err := os.Stat(n)
			ok = err == nil
		default:
			ok = find(n) != ""
		}
		if !ok {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		Skipf(t, "%s need %s", what, strings.Join(missing, ", "))
	}
}

// Program is All for one program, found in PATH or in /usr/sbin or /sbin
// (which a test's PATH may lack); it answers the program's path.
func Program(t testing.TB, what, name string) string {
	t.Helper()
	All(t, what, name)
	return find(name)
}

// find is the path of program name, or "".
func find(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		if p := filepath.Join(dir, name); isExecutable(p) {
			return p
		}
	}
	return ""
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// Cached answers a heavy build the tests use (Docker Compose,
// kube-apiserver): the path the environment variable env names, else name
// in the build cache (BERTH_CACHE, by default ~/.cache/berth) that script
// fills; without it t is skipped (failed under BERTH_TEST_STRICT=1).
func Cached(t testing.TB, env, name, script string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		cache := os.Getenv("BERTH_CACHE")
		if cache == "" {
			home, _ := os.UserHomeDir()
			cache = filepath.Join(home, ".cache", "berth")
		}
		p = filepath.Join(cache, name)
	}
	if _, err := os.Stat(p); err != nil {
		Skipf(t, "%s is not built (%s builds it; %s names another): %v", name, script, env, err)
	}
	return p
}
