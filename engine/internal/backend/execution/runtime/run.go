package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// RunAttached runs the container whose bundle is in bundle to completion
// with "runtime run", without conmon: its stdout and stderr go to the given
// writers and its exit code is returned. The runtime's state and cgroup are
// removed before it returns, also when ctx ends (the container is killed).
// Builds use it for RUN steps, which live only as long as the request.
func (r *Runtime) RunAttached(ctx context.Context, id, bundle string, stdout, stderr io.Writer) (int, error) {
	cmd := exec.Command(r.path, "--root", r.stateRoot, "run", "--bundle", bundle, id)
	cmd.Env = minimalEnv()
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return -1, fmt.Errorf("%s run: %w", r.name, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var waitErr error
	select {
	case waitErr = <-done:
	case <-ctx.Done():
		// The container's processes go first, then the runtime process.
		killCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = r.Kill(killCtx, id, syscall.SIGKILL, true)
		cancel()
		_ = cmd.Process.Kill()
		<-done
		waitErr = ctx.Err()
	}
	delCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.Delete(delCtx, id, true); err != nil {
		r.logger.Warn("removing a finished build container", "container", id, "err", err)
	}
	if ctx.Err() != nil {
		return -1, ctx.Err()
	}
	var exit *exec.ExitError
	if errors.As(waitErr, &exit) {
		return exit.ExitCode(), nil
	}
	if waitErr != nil {
		return -1, fmt.Errorf("%s run: %w", r.name, waitErr)
	}
	return 0, nil
}

// RemoveStale force-deletes the runtime's containers whose IDs start with
// prefix: what RunAttached left when the engine was killed in the middle.
func (r *Runtime) RemoveStale(ctx context.Context, prefix string) error {
	entries, err := os.ReadDir(r.stateRoot)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		if err := r.Delete(ctx, e.Name(), true); err != nil {
			return err
		}
	}
	return nil
}
