package handlers

import (
	"errors"
	"net/http"

	"github.com/berth-project/berth/engine/internal/backend/execution/containerio"
	"github.com/berth-project/berth/engine/internal/backend/execution/stream"
	"github.com/berth-project/berth/engine/internal/core"
)

// attachQuery are AttachContainer's parameters; the stream selection is
// read by attachStreams.
type attachQuery struct {
	DetachKeys string `query:"detachKeys"`
	Logs       bool   `query:"logs"`
	Stream     bool   `query:"stream"`
}

// attachStreams decides which streams to attach, as Podman does.
func attachStreams(r *http.Request) (stdin, stdout, stderr bool, err error) {
	given := r.URL.Query()
	stdin, stdout, stderr = true, true, true
	selected := false
	for _, p := range []struct {
		name string
		dst  *bool
	}{{"stdin", &stdin}, {"stdout", &stdout}, {"stderr", &stderr}} {
		if _, ok := given[p.name]; !ok {
			continue
		}
		if !selected {
			stdin, stdout, stderr = false, false, false
			selected = true
		}
		var v struct {
			B bool `query:"b"`
		}
		if err := decodeValues(map[string][]string{"b": given[p.name]}, &v); err != nil {
			return false, false, false, core.InvalidArgument(p.name, err)
		}
		*p.dst = v.B
	}
	if !stdin && !stdout && !stderr {
		return false, false, false, core.InvalidArgument("stdin", errors.New("at least one of stdin, stdout, stderr must be true"))
	}
	return stdin, stdout, stderr, nil
}

// attachContainer hijacks the connection and joins it to the container's
// standard streams through conmon: raw bytes with a terminal, multiplexed
// frames without.
func (s *Server) attachContainer(w http.ResponseWriter, r *http.Request) {
	q := attachQuery{Stream: true}
	if !queryInto(w, r, &q) {
		return
	}
	wantIn, wantOut, wantErr, err := attachStreams(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if !q.Stream && !q.Logs {
		writeError(w, core.InvalidArgument("stream", errors.New("at least one of logs or stream must be set")))
		return
	}
	keySpec := stream.DefaultDetachKeys
	if _, ok := r.URL.Query()["detachKeys"]; ok {
		keySpec = q.DetachKeys
	}
	keys, err := stream.ParseDetachKeys(keySpec)
	if err != nil {
		writeError(w, core.InvalidArgument("detachKeys", err))
		return
	}
	name := pathParam(r, "name")
	var sess *containerio.Session
	var tty bool
	if q.Stream {
		if sess, err = s.deps.ContainerIO.Attach(r.Context(), name); err != nil {
			writeError(w, err)
			return
		}
		defer sess.Close()
		tty = sess.Container.Spec.Terminal
	} else {
		c, err := s.deps.Containers.Lookup(r.Context(), name)
		if err != nil {
			writeError(w, err)
			return
		}
		tty = c.Spec.Terminal
	}

	conn, rw, err := stream.Hijack(w, r)
	if err != nil {
		s.logger.Error("attach: hijack", "container", name, "err", err)
		return
	}
	defer conn.Close()
	err = containerio.ServeHijacked(r.Context(), rw, sess, s.deps.ContainerIO.Logs, name, containerio.Hijacked{
		TTY: tty, Stdin: wantIn, Stdout: wantOut, Stderr: wantErr, ReplayLog: q.Logs, DetachKeys: keys,
	})
	if err != nil {
		s.logger.Log(r.Context(), stream.EndLevel(err), "attach ended", "container", name, "err", err)
	}
}

// resizeContainer sets a container's terminal size through conmon.
func (s *Server) resizeContainer(w http.ResponseWriter, r *http.Request) {
	q, err := decodeResize(r)
	if err != nil {
		writeError(w, err)
		return
	}
	// Podman answers 200 with no body here.
	finishStatus(w, http.StatusOK, s.deps.ContainerIO.Resize(r.Context(), pathParam(r, "name"), uint16(q.Height), uint16(q.Width)))
}
