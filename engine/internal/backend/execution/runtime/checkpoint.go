package runtime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// CheckpointOptions are the flags of "runtime checkpoint".
type CheckpointOptions struct {
	LeaveRunning, TCPEstablished, FileLocks bool
}

// Checkpoint dumps container id with CRIU into dir (images and logs). On a
// failure the error carries CRIU's own error lines from dump.log.
func (r *Runtime) Checkpoint(ctx context.Context, id, dir string, o CheckpointOptions) error {
	if r.isPause(id) {
		return errPause("checkpoint", id)
	}
	args := []string{"checkpoint", "--image-path", dir, "--work-path", dir}
	if o.LeaveRunning {
		args = append(args, "--leave-running")
	}
	if o.TCPEstablished {
		args = append(args, "--tcp-established")
	}
	if o.FileLocks {
		args = append(args, "--file-locks")
	}
	if _, err := r.run(ctx, append(args, id)...); err != nil {
		if detail := criuErrors(filepath.Join(dir, "dump.log")); detail != "" {
			return fmt.Errorf("%w; CRIU: %s", err, detail)
		}
		return err
	}
	return nil
}

// RestoreOptions returns the runtime options conmon passes to "runtime restore".
func RestoreOptions(dir string, tcpEstablished, fileLocks bool) []string {
	opts := []string{"--work-path=" + dir}
	if tcpEstablished {
		opts = append(opts, "--tcp-established")
	}
	if fileLocks {
		opts = append(opts, "--file-locks")
	}
	return opts
}

// criuErrors returns the "Error" lines of a CRIU log (the last three).
func criuErrors(logFile string) string {
	data, err := os.ReadFile(logFile)
	if err != nil {
		return ""
	}
	var errs []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, "Error") {
			errs = append(errs, strings.TrimSpace(line))
		}
	}
	if len(errs) > 3 {
		errs = errs[len(errs)-3:]
	}
	return strings.Join(errs, "; ")
}
