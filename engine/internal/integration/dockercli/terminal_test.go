package dockercli

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/berth-project/berth/engine/internal/testsupport/enginetest"
)

// TestDockerTerminal: docker run -it and docker exec -it through a
// pseudo-terminal (script(1)): the container sees a terminal, reads what
// is typed and its exit code comes back.
func TestDockerTerminal(t *testing.T) {
	enginetest.Require(t, "the docker terminal test", "script")
	te := startEngine(t)
	term := func(input, command string) (string, error) {
		cmd := exec.Command("script", "-qec", command, "/dev/null")
		cmd.Env, cmd.Dir = te.env, te.Dir
		cmd.Stdin = strings.NewReader(input)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return strings.ReplaceAll(out.String(), "\r", ""), err
	}
	out, err := term("tty && echo typed-$((40+2))\nexit 5\n", "docker run -it --rm localhost/busybox sh")
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 5 || !strings.Contains(out, "/dev/pts/") || !strings.Contains(out, "typed-42") {
		t.Fatalf("docker run -it: %v\n%s", err, out)
	}
	te.run("docker", "run", "-d", "--name", "term", "localhost/busybox", "sleep", "60")
	out, err = term("tty && echo exec-$((1+1))\nexit 3\n", "docker exec -it term sh")
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 || !strings.Contains(out, "/dev/pts/") || !strings.Contains(out, "exec-2") {
		t.Fatalf("docker exec -it: %v\n%s", err, out)
	}
}
