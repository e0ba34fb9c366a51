package commandtable

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
)

// TestReadmeDockerCommands runs the README's docker table: every row's
// setup, then its command, with the docker CLI (DOCKER_HOST pointed at
// one engine, the classic builder), in table order. BERTH_COMMANDS_RUN and
// BERTH_COMMANDS_REPORT work as for the podman table.
func TestReadmeDockerCommands(t *testing.T) {
	t.Parallel()
	testdeadline.Set(t, tableDeadline)
	rows := selectedRows(t, dockerTable)
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

	runRows(t, sh, rows)
}

// newDockerShell is a shell whose docker talks to url with a private
// configuration directory and the classic builder.
func newDockerShell(t *testing.T, dir, url string) *shell {
	t.Helper()
	work := filepath.Join(dir, "work")
	config := filepath.Join(dir, "docker-config")
	prepareWork(t, work, config)
	if err := os.WriteFile(filepath.Join(config, "config.json"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "DOCKER_HOST="+url, "DOCKER_CONFIG="+config, "DOCKER_BUILDKIT=0", "DOCKER_CLI_HINTS=false")
	return &shell{t: t, dir: work, env: env, generation: 4}
}
