package dockerapi

import (
	"errors"
	"fmt"
	"net/http"
	"sync"

	containertypes "github.com/docker/docker/api/types/container"

	"github.com/berth-project/berth/engine/internal/backend/execution/stream"
	"github.com/berth-project/berth/engine/internal/backend/lifecycle/exec"
	"github.com/berth-project/berth/engine/internal/core"
)

// execCreate answers docker exec's first call.
func (s *server) execCreate(w http.ResponseWriter, r *http.Request) {
	var body containertypes.ExecOptions
	if err := decodeBody(r, &body); err != nil {
		writeError(w, err)
		return
	}
	if len(body.Cmd) == 0 {
		writeError(w, core.InvalidArgument("Cmd", errors.New("no exec command specified")))
		return
	}
	c, ok := s.runningContainer(w, r, pathParam(r, "name"))
	if !ok {
		return
	}
	id, err := s.deps.Exec.Create(r.Context(), c.ID, exec.Config{
		Cmd: body.Cmd, Env: body.Env, WorkingDir: body.WorkingDir, User: body.User, Tty: body.Tty,
		Privileged: body.Privileged, AttachStdin: body.AttachStdin, AttachStdout: body.AttachStdout,
		AttachStderr: body.AttachStderr, DetachKeys: body.DetachKeys, UserAtStart: true,
	})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, containertypes.ExecCreateResponse{ID: id})
}

// execInspect answers docker's exec inspect.
func (s *server) execInspect(w http.ResponseWriter, r *http.Request) {
	sess, ok := s.execSession(w, r)
	if !ok {
		return
	}
	type processConfig struct {
		Tty        bool     `json:"tty"`
		Entrypoint string   `json:"entrypoint"`
		Arguments  []string `json:"arguments"`
		Privileged bool     `json:"privileged"`
		User       string   `json:"user,omitempty"`
	}
	out := struct {
		ID            string        `json:"ID"`
		Running       bool          `json:"Running"`
		ExitCode      *int          `json:"ExitCode"`
		ProcessConfig processConfig `json:"ProcessConfig"`
		OpenStdin     bool          `json:"OpenStdin"`
		OpenStderr    bool          `json:"OpenStderr"`
		OpenStdout    bool          `json:"OpenStdout"`
		CanRemove     bool          `json:"CanRemove"`
		ContainerID   string        `json:"ContainerID"`
		DetachKeys    []byte        `json:"DetachKeys"`
		Pid           int           `json:"Pid"`
	}{
		ID: sess.ID, Running: sess.Running, ContainerID: sess.ContainerID, Pid: sess.Pid,
		OpenStdin: sess.Config.AttachStdin, OpenStdout: sess.Config.AttachStdout, OpenStderr: sess.Config.AttachStderr,
		ProcessConfig: processConfig{Tty: sess.Config.Tty, Privileged: sess.Config.Privileged, User: sess.Config.User, Arguments: []string{}},
		// dockerd shows the detach sequence as bytes (base64 in JSON), ""
		// where the exec has none.
		DetachKeys: []byte{},
	}
	if keys, err := stream.ParseDetachKeys(sess.Config.DetachKeys); err == nil && keys != nil {
		out.DetachKeys = keys
	}
	if len(sess.Config.Cmd) > 0 {
		out.ProcessConfig.Entrypoint = sess.Config.Cmd[0]
		out.ProcessConfig.Arguments = sess.Config.Cmd[1:]
	}
	if _, starting := s.starting.Load(sess.ID); starting {
		out.Running = true
	} else if sess.Started && !sess.Running {
		code := sess.ExitCode
		if sess.StartFailed {
			// dockerd's code for an exec it could not start, whatever the
			// reason; docker exec exits with it.
			code = execStartFailedCode
		}
		out.ExitCode = &code
	}
	writeJSON(w, http.StatusOK, out)
}

// execStart runs a session: detached (200 at once) or attached over the
// hijacked connection, closed once the process exited.
func (s *server) execStart(w http.ResponseWriter, r *http.Request) {
	var body containertypes.ExecStartOptions
	if err := decodeBody(r, &body); err != nil {
		writeError(w, err)
		return
	}
	id := pathParam(r, "id")
	sess, ok := s.execSession(w, r)
	if !ok {
		return
	}
	if sess.Started {
		writeMessage(w, http.StatusConflict, fmt.Sprintf("Error: Exec command %s has already run", id))
		return
	}
	if _, ok := s.runningContainer(w, r, sess.ContainerID); !ok {
		return
	}
	var size *[2]uint16
	if body.ConsoleSize != nil && sess.Config.Tty {
		size = &[2]uint16{uint16(body.ConsoleSize[0]), uint16(body.ConsoleSize[1])}
	}
	if body.Detach {
		if _, err := s.deps.Exec.Start(r.Context(), id, exec.Streams{}, size); err != nil {
			var failed *exec.StartError
			if errors.As(err, &failed) {
				// dockerd: a command missing or not executable is the
				// client's mistake (400), anything else the runtime's.
				status := http.StatusInternalServerError
				if (failed.Code == 126 || failed.Code == 127) && !failed.Lookup {
					status = http.StatusBadRequest
				}
				writeMessage(w, status, runtimeExecFailed(failed))
				return
			}
			writeError(w, err)
			return
		}
		w.WriteHeader(http.StatusOK)
		return
	}
	// From the hijack until the engine has started the process, inspect
	// reports the session running: clients attach, then poll inspect
	// until it stops running, and must not read "exited 0" before it ran.
	s.starting.Store(id, struct{}{})
	startDone := sync.OnceFunc(func() { s.starting.Delete(id) })
	defer startDone()
	conn, rw, err := stream.Hijack(w, r)
	if err != nil {
		s.logger.Error("docker exec: hijack", "session", id, "err", err)
		return
	}
	defer conn.Close()
	var streams exec.Streams
	var mux *stream.Mux
	streams.Stdout, streams.Stderr, mux = stream.Outputs(rw.Writer, sess.Config.Tty, sess.Config.Tty || sess.Config.AttachStdout, sess.Config.AttachStderr)
	if sess.Config.AttachStdin {
		streams.Stdin = rw.Reader
	}
	started, err := s.deps.Exec.Start(r.Context(), id, streams, size)
	startDone()
	if err != nil {
		// dockerd writes why on the exec's stdout, where docker exec
		// prints it, before the client reads the exit code from inspect.
		msg := err.Error()
		var failed *exec.StartError
		if errors.As(err, &failed) {
			msg = runtimeExecFailed(failed)
		}
		if mux != nil {
			_ = mux.WriteFrame(stream.Stdout, []byte(msg+"\r\n"))
		} else if streams.Stdout != nil {
			_, _ = streams.Stdout.Write([]byte(msg + "\r\n"))
		}
		s.logger.Warn("docker exec start failed", "session", id, "err", err)
		return
	}
	if _, err := started.Wait(); err != nil {
		s.logger.Debug("docker exec session ended", "session", id, "err", err)
	}
	_ = rw.Flush()
}

// execResize sets a session's terminal size.
func (s *server) execResize(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.execSession(w, r); !ok {
		return
	}
	resize(w, r, s.deps.Exec.Resize, pathParam(r, "id"))
}

// execStartFailedCode is the exit code dockerd gives an exec whose process
// could not be started (Podman's 127 for a missing command stays on the
// libpod API).
const execStartFailedCode = 126

// execSession finds the session the path names; otherwise it answers,
// a missing one in dockerd's words ("No such exec instance: ID").
func (s *server) execSession(w http.ResponseWriter, r *http.Request) (*exec.Session, bool) {
	id := pathParam(r, "id")
	sess, err := s.deps.Exec.Get(r.Context(), id)
	if errors.Is(err, core.ErrNoSuchExecSession) {
		writeMessage(w, http.StatusNotFound, "No such exec instance: "+id)
		return nil, false
	}
	if err != nil {
		writeError(w, err)
		return nil, false
	}
	return sess, true
}

// runtimeExecFailed words a start failure as dockerd does, with
// containerd's prefix and gRPC code around the runtime's reason.
func runtimeExecFailed(err *exec.StartError) string {
	if err.Lookup {
		// dockerd looks the user up itself, before the runtime.
		return err.Err.Error()
	}
	return "OCI runtime exec failed: " + err.Err.Error() + ": unknown"
}

// runningContainer finds the container nameOrID names, which must be
// running, as an exec needs it; otherwise it answers (409 for a container
// in another state, in dockerd's words).
func (s *server) runningContainer(w http.ResponseWriter, r *http.Request, nameOrID string) (*core.Container, bool) {
	c, ok := s.lookup(w, r, nameOrID)
	if !ok {
		return nil, false
	}
	switch c.State {
	case core.StateRunning:
		return c, true
	case core.StatePaused:
		writeMessage(w, http.StatusConflict, fmt.Sprintf("Container %s is paused, unpause the container before exec", nameOrID))
	default:
		writeMessage(w, http.StatusConflict, fmt.Sprintf("Container %s is not running", c.ID))
	}
	return nil, false
}
