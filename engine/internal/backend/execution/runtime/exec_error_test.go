package runtime

import (
	"bytes"
	"context"
	"io"
	"strings"
	"syscall"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/core"
)

// TestExecMissingCommandOneMessage: an exec whose command does not exist
// reports one clear error, and runc's own log line does not reach the
// session's output (plain or terminal).
func TestExecMissingCommandOneMessage(t *testing.T) {
	r := newRuntime(t)
	ctx := context.Background()
	id := "berth-runtime-test-" + strings.ToLower(t.Name())
	dir := newContainer(t, r, id, "sh", "-c", "while true; do sleep 0.05; done")
	mustStart(t, r, id)
	defer func() {
		r.Kill(ctx, id, syscall.SIGKILL, false)
		waitExit(t, r, id)
	}()
	c := &core.Container{ID: id, Bundle: dir}
	check := func(name string, terminal bool) {
		var out, errOut bytes.Buffer
		req := core.ExecRequest{Process: specs.Process{Terminal: terminal, Args: []string{"nosuchcmd"}, Cwd: "/", Env: []string{"PATH=/bin"}}}
		var pw *io.PipeWriter
		done := make(chan struct{})
		if terminal {
			var pr *io.PipeReader
			pr, pw = io.Pipe()
			req.Stdout = pw
			go func() { io.Copy(&out, pr); close(done) }()
		} else {
			req.Stdout, req.Stderr = &out, &errOut
			close(done)
		}
		p, err := r.Exec(ctx, c, req)
		if err == nil {
			var code int
			code, err = p.Wait()
			if code == 0 {
				t.Errorf("%s: exit 0", name)
			}
		}
		if pw != nil {
			pw.Close()
		}
		<-done
		if err == nil {
			t.Fatalf("%s: no error for a missing command", name)
		}
		msg := err.Error()
		if strings.Count(msg, "exec failed") != 1 || !strings.Contains(msg, `"nosuchcmd"`) || !strings.Contains(msg, "not found") || strings.Contains(msg, "level=") {
			t.Errorf("%s: error %q, want one clear message naming the command", name, msg)
		}
		if out.Len() > 0 || errOut.Len() > 0 {
			t.Errorf("%s: runc's message reached the session: stdout %q stderr %q", name, out.String(), errOut.String())
		}
	}
	check("plain", false)
	check("terminal", true)
}
