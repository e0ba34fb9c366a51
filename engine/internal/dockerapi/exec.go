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
		AttachStderr: body.AttachStderr, DetachKeys: body.DetachKeys,
	})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, containertypes.ExecCreateResponse{ID: id})
}

// execInspect answers docker's exec inspect.
func (s *server) execInspect(w http.ResponseWriter, r *http.Request) {
	sess, err := s.deps.Exec.Get(r.Context(), pathParam(r, "id"))
	if err != nil {
		writeError(w, err)
		return
	}
	type processConfig struct {
		Tty        bool     `json:"tty"`
		Entrypoint string   `json:"entrypoint"`
		Arguments  []string `json:"arguments"`
		Privileged bool     `json:"privileged"`
		User       string   `json:"user"`
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
	}
	if len(sess.Config.Cmd) > 0 {
		out.ProcessConfig.Entrypoint = sess.Config.Cmd[0]
		out.ProcessConfig.Arguments = sess.Config.Cmd[1:]
	}
	if _, starting := s.starting.Load(sess.ID); starting {
		out.Running = true
	} else if sess.Started && !sess.Running {
		code := sess.ExitCode
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
	sess, err := s.deps.Exec.Get(r.Context(), id)
	if err != nil {
		writeError(w, err)
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
		msg := []byte(err.Error() + "\n")
		if mux != nil {
			_ = mux.WriteFrame(stream.Stderr, msg)
		} else if streams.Stdout != nil {
			_, _ = streams.Stdout.Write(msg)
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
	resize(w, r, s.deps.Exec.Resize, pathParam(r, "id"))
}

// runningContainer finds the container nameOrID names, which must be
// running, as an exec needs it; otherwise it answers (409 for a container
// in another state, as Docker does).
func (s *server) runningContainer(w http.ResponseWriter, r *http.Request, nameOrID string) (*core.Container, bool) {
	c, ok := s.lookup(w, r, nameOrID)
	if !ok {
		return nil, false
	}
	if c.State != core.StateRunning {
		writeMessage(w, http.StatusConflict, fmt.Sprintf("container %s is not running", c.ID))
		return nil, false
	}
	return c, true
}
