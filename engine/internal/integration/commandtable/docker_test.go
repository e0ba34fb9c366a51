package commandtable

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
)

// TestReadmeDockerCommands runs the README's docker table: every row's
// setup, then its command, with the docker CLI (DOCKER_HOST pointed at
// one engine, the classic builder), in table order. BERTH_COMMANDS_RUN and
// BERTH_COMMANDS_REPORT work as for the podman table.
func TestReadmeDockerCommands(t *testing.T) {
	testdeadline.Set(t, 6*time.Minute)
	rows, err := readTable(readmePath, dockerTable)
	if err != nil {
		t.Fatal(err)
	}
	if only := os.Getenv("BERTH_COMMANDS_RUN"); only != "" {
		re, err := regexp.Compile(only)
		if err != nil {
			t.Fatalf("BERTH_COMMANDS_RUN: %v", err)
		}
		rows = filterRows(rows, re)
	}
	e := enginetest.Start(t, enginetest.Options{What: "the README's docker commands", Bridged: true, Needs: []string{"docker"}})
	sh := newDockerShell(t, e.Dir, "tcp://"+e.Addr)
	// Runs before the engine's cleanup: what the rows made goes through
	// the same client first.
	t.Cleanup(func() {
		for _, line := range []string{
			"docker ps -aq | xargs -r docker rm -f",
			"docker network ls -q --filter type=custom | xargs -r docker network rm",
			"docker volume ls -q | xargs -r docker volume rm -f",
		} {
			_, _, _ = sh.run(line)
		}
	})

	report := os.Getenv("BERTH_COMMANDS_REPORT") == "1"
	for _, r := range rows {
		worked, detail := sh.runRow(r)
		if report {
			t.Logf("line %d: %-60s worked=%v %s", r.line, r.command, worked, detail)
		}
		switch {
		case r.status == statusWorks && !worked:
			t.Errorf("README line %d says %q works, but it failed: %s", r.line, r.command, detail)
		case r.status == statusNotYet && worked:
			t.Errorf("README line %d says %q does not work yet, but it succeeded: mark it works", r.line, r.command)
		}
	}
}

// newDockerShell is a shell whose docker talks to url with a private
// configuration directory and the classic builder.
func newDockerShell(t *testing.T, dir, url string) *shell {
	t.Helper()
	work := filepath.Join(dir, "work")
	config := filepath.Join(dir, "docker-config")
	for _, d := range []string{work, config} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(config, "config.json"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, content := range fixtures {
		if err := os.WriteFile(filepath.Join(work, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(work, "rootfs.tar"), rootfsTar(t), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "DOCKER_HOST="+url, "DOCKER_CONFIG="+config, "DOCKER_BUILDKIT=0", "DOCKER_CLI_HINTS=false")
	return &shell{t: t, dir: work, env: env}
}
