package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/berth-project/berth/engine/internal/backend/execution/stream"
	"github.com/berth-project/berth/engine/internal/backend/lifecycle/exec"
	"github.com/berth-project/berth/engine/internal/core"
)

// ExecSessions are the exec session operations (exec.Manager implements them).
type ExecSessions interface {
	Create(ctx context.Context, nameOrID string, cfg exec.Config) (string, error)
	Get(ctx context.Context, id string) (*exec.Session, error)
	Inspect(ctx context.Context, id string) (*exec.Inspect, error)
	Start(ctx context.Context, id string, streams exec.Streams, size *[2]uint16) (*exec.Started, error)
	Resize(ctx context.Context, id string, height, width uint16) error
	Remove(ctx context.Context, id string, force bool) error
}

func (s *Server) execCreate(w http.ResponseWriter, r *http.Request) {
	var cfg exec.Config
	if err := decodeJSONBody(r, &cfg); err != nil {
		writeError(w, err)
		return
	}
	id, err := s.deps.Exec.Create(r.Context(), pathParam(r, "name"), cfg)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, struct {
		ID string `json:"Id"`
	}{id})
}

func (s *Server) execInspect(w http.ResponseWriter, r *http.Request) {
	out, err := s.deps.Exec.Inspect(r.Context(), chi.URLParam(r, "id"))
	finishJSON(w, http.StatusOK, out, err)
}

// execStartBody is ExecStartHandler's body.
type execStartBody struct {
	Detach bool   `json:"Detach"`
	Tty    bool   `json:"Tty"`
	Height uint16 `json:"h"`
	Width  uint16 `json:"w"`
}

// execStart runs a session: detached (200 at once), or attached over the
// hijacked connection (raw with a terminal, multiplexed frames without),
// which closes once the process exited and its exit code is stored.
func (s *Server) execStart(w http.ResponseWriter, r *http.Request) {
	var body execStartBody
	if err := decodeJSONBody(r, &body); err != nil {
		writeError(w, err)
		return
	}
	id := chi.URLParam(r, "id")
	sess, err := s.deps.Exec.Get(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	c, err := s.deps.Containers.Lookup(r.Context(), sess.ContainerID)
	if err != nil {
		writeError(w, err)
		return
	}
	if c.State != core.StateRunning {
		writeError(w, fmt.Errorf("cannot exec in a container that is not running; container %s is %s: %w", c.ID, c.State, core.ErrStateConflict))
		return
	}
	if sess.Started {
		writeError(w, fmt.Errorf("exec session %s has already been started: %w", id, core.ErrStateConflict))
		return
	}
	if body.Detach {
		if _, err := s.deps.Exec.Start(r.Context(), id, exec.Streams{}, nil); err != nil {
			writeError(w, err)
			return
		}
		w.WriteHeader(http.StatusOK)
		return
	}

	conn, rw, err := stream.Hijack(w, r)
	if err != nil {
		s.logger.Error("exec: hijack", "session", id, "err", err)
		return
	}
	defer conn.Close()
	tty := sess.Config.Tty
	var streams exec.Streams
	var mux *stream.Mux
	streams.Stdout, streams.Stderr, mux = stream.Outputs(rw.Writer, tty, true, true)
	if sess.Config.AttachStdin {
		streams.Stdin = rw.Reader
	}
	var size *[2]uint16
	if tty && (body.Height > 0 || body.Width > 0) {
		size = &[2]uint16{body.Height, body.Width}
	}
	started, err := s.deps.Exec.Start(r.Context(), id, streams, size)
	if err != nil {
		// The status line is sent: report the failure in the stream. A
		// process that could not start is the session's result (exit code
		// 126/127 in inspect), told on stderr as a shell would; anything
		// else is a server error frame.
		msg := []byte(err.Error() + "\n")
		var startErr *exec.StartError
		switch {
		case mux != nil && errors.As(err, &startErr):
			_ = mux.WriteFrame(stream.Stderr, msg)
		case mux != nil:
			_ = mux.WriteFrame(stream.System, msg)
		default:
			_, _ = streams.Stdout.Write(msg)
		}
		s.logger.Warn("exec start failed", "session", id, "err", err)
		return
	}
	if _, err := started.Wait(); err != nil {
		s.logger.Debug("exec session ended", "session", id, "err", err)
	}
	_ = rw.Flush()
}

// execResize sets a session's terminal size; 201 as Podman answers. With
// running=true a session that is no longer running is not an error.
func (s *Server) execResize(w http.ResponseWriter, r *http.Request) {
	q, err := decodeResize(r)
	if err != nil {
		writeError(w, err)
		return
	}
	err = s.deps.Exec.Resize(r.Context(), chi.URLParam(r, "id"), uint16(q.Height), uint16(q.Width))
	if err != nil && !(q.Running && errors.Is(err, core.ErrStateConflict)) {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusCreated)
}

// execRemove removes a session (podman 4.8 and later, after each exec
// they ran): 404 for an unknown one, 409 for a running one without
// {"Force": true}; 200 with no body, as Podman answers.
func (s *Server) execRemove(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Force bool `json:"Force"`
	}
	if err := decodeJSONBody(r, &body); err != nil {
		writeError(w, err)
		return
	}
	finishStatus(w, http.StatusOK, s.deps.Exec.Remove(r.Context(), chi.URLParam(r, "id"), body.Force))
}
