package dockerapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	containertypes "github.com/docker/docker/api/types/container"

	"github.com/berth-project/berth/engine/internal/backend/execution/containerio"
	"github.com/berth-project/berth/engine/internal/backend/execution/stats"
	"github.com/berth-project/berth/engine/internal/backend/execution/stream"
	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/httpwire"
)

// containerAttach hijacks the connection and joins it to the container's
// standard streams: raw bytes with a terminal, multiplexed frames without.
// Docker selects streams with stdin/stdout/stderr (all false unless given).
func (s *server) containerAttach(w http.ResponseWriter, r *http.Request) {
	q := queryOf(r)
	wantIn, wantOut, wantErr := q.boolean("stdin", false), q.boolean("stdout", false), q.boolean("stderr", false)
	doStream, doLogs := q.boolean("stream", false), q.boolean("logs", false)
	keySpec := stream.DefaultDetachKeys
	if q.has("detachKeys") {
		keySpec = q.str("detachKeys")
	}
	keys, err := stream.ParseDetachKeys(keySpec)
	if err != nil {
		writeError(w, core.InvalidArgument("detachKeys", err))
		return
	}
	if !doStream && !doLogs {
		writeError(w, core.InvalidArgument("stream", errors.New("at least one of logs or stream must be set")))
		return
	}
	name := pathParam(r, "name")
	c, ok := s.lookup(w, r, name)
	if !ok {
		return
	}
	var sess *containerio.Session
	if doStream {
		if sess, err = s.deps.ContainerIO.Attach(r.Context(), c.ID); err != nil {
			if c.State != core.StateConfigured {
				writeError(w, err)
				return
			}
			// Attaching to a container that was never started prepares
			// it, which fails where its process cannot run (a missing
			// executable). Docker's attach never fails for that: the
			// client gets an empty stream and the error from its start.
			s.logger.Debug("docker attach: preparing the container failed", "container", name, "err", err)
			sess = nil
			doLogs = false
		} else {
			defer sess.Close()
		}
	}
	tty := c.Spec.Terminal
	conn, rw, err := stream.Hijack(w, r)
	if err != nil {
		s.logger.Error("docker attach: hijack", "container", name, "err", err)
		return
	}
	defer conn.Close()
	err = containerio.ServeHijacked(r.Context(), rw, sess, s.deps.ContainerIO.Logs, c.ID, containerio.Hijacked{
		TTY: tty, Stdin: wantIn, Stdout: wantOut, Stderr: wantErr, ReplayLog: doLogs, DetachKeys: keys,
	})
	if err != nil {
		s.logger.Log(r.Context(), stream.EndLevel(err), "docker attach ended", "container", name, "err", err)
	}
}

// terminalSize reads h and w.
func terminalSize(r *http.Request) (uint16, uint16, error) {
	q := queryOf(r)
	h, wd := q.integer("h", 0), q.integer("w", 0)
	if q.err != nil {
		return 0, 0, q.err
	}
	if h < 0 || wd < 0 || h > 0xffff || wd > 0xffff {
		return 0, 0, core.InvalidArgument("h", errors.New("terminal dimensions must fit in 16 bits"))
	}
	return uint16(h), uint16(wd), nil
}

// containerResize sets a container's terminal size.
func (s *server) containerResize(w http.ResponseWriter, r *http.Request) {
	resize(w, r, s.deps.ContainerIO.Resize, pathParam(r, "name"))
}

// resize answers a terminal resize of a container or exec session (id) by
// set: 200, or the error of h and w or of set.
func resize(w http.ResponseWriter, r *http.Request, set func(ctx context.Context, id string, h, w uint16) error, id string) {
	h, wd, err := terminalSize(r)
	if err != nil {
		writeError(w, err)
		return
	}
	finishStatus(w, http.StatusOK, set(r.Context(), id, h, wd))
}

// containerLogs streams a container's log: multiplexed frames, or raw
// bytes for a container with a terminal (as Docker sends them).
func (s *server) containerLogs(w http.ResponseWriter, r *http.Request) {
	q := queryOf(r)
	follow, wantOut, wantErr, stamps := q.boolean("follow", false), q.boolean("stdout", false), q.boolean("stderr", false), q.boolean("timestamps", false)
	if !wantOut && !wantErr {
		writeError(w, core.InvalidArgument("stdout", errors.New("you must choose at least one stream")))
		return
	}
	opts := containerio.LogOptions{Tail: -1, Follow: follow}
	if tail := q.str("tail"); tail != "" && tail != "all" {
		n, err := strconv.Atoi(tail)
		if err != nil {
			writeError(w, core.InvalidArgument("tail", fmt.Errorf("%q is not a number or \"all\"", tail)))
			return
		}
		if n >= 0 {
			opts.Tail = n
		}
	}
	var err error
	now := time.Now()
	if v := q.str("since"); v != "" && v != "0" {
		if opts.Since, err = parseTime(v, now); err != nil {
			writeError(w, core.InvalidArgument("since", err))
			return
		}
	}
	if v := q.str("until"); v != "" && v != "0" {
		if opts.Until, err = parseTime(v, now); err != nil {
			writeError(w, core.InvalidArgument("until", err))
			return
		}
	}
	name := pathParam(r, "name")
	c, ok := s.lookup(w, r, name)
	if !ok {
		return
	}
	if err := c.LogsReadable(); err != nil {
		if errors.Is(err, core.ErrLogsNotKept) {
			// dockerd's words for a driver it cannot read, which docker
			// logs prints.
			writeMessage(w, http.StatusNotImplemented, "configured logging driver does not support reading")
			return
		}
		writeError(w, err)
		return
	}
	tty := c.Spec.Terminal
	if tty {
		w.Header().Set("Content-Type", "application/vnd.docker.raw-stream")
	} else {
		w.Header().Set("Content-Type", "application/vnd.docker.multiplexed-stream")
	}
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	write := stream.NewMux(w, rc.Flush).WriteFrame
	if tty {
		write = func(_ byte, frame []byte) error {
			if _, err := w.Write(frame); err != nil {
				return err
			}
			return rc.Flush()
		}
	}
	var stamp func([]byte, time.Time) []byte
	if stamps {
		stamp = func(frame []byte, t time.Time) []byte { return t.UTC().AppendFormat(frame, time.RFC3339Nano) }
	}
	err = s.deps.ContainerIO.Logs(r.Context(), c.ID, opts, containerio.LogFrames(wantOut, wantErr, stamp, write))
	if err != nil && r.Context().Err() == nil {
		s.logger.Warn("docker logs", "container", name, "err", err)
	}
}

// statsInterval is how often a stats stream reports (Docker's second).
const statsInterval = time.Second

// containerStats answers one container's usage in Docker's shape, once
// or every second while streaming.
func (s *server) containerStats(w http.ResponseWriter, r *http.Request) {
	q := queryOf(r)
	streaming, oneShot := q.boolean("stream", true), q.boolean("one-shot", false)
	if streaming && oneShot {
		writeError(w, core.InvalidArgument("one-shot", errors.New("cannot have stream=true and one-shot=true")))
		return
	}
	name := pathParam(r, "name")
	report, err := s.deps.ContainerIO.DockerStats(r.Context(), name, nil)
	if err != nil {
		writeError(w, err)
		return
	}
	next := func(prev *stats.DockerStats) (*stats.DockerStats, error) {
		return s.deps.ContainerIO.DockerStats(r.Context(), name, prev)
	}
	if !streaming && !oneShot {
		// Docker's stream=false reports after one interval, with the
		// previous sample filled in, so that clients can compute rates.
		select {
		case <-r.Context().Done():
			return
		case <-time.After(statsInterval):
		}
		if report, err = next(report); err != nil {
			writeError(w, err)
			return
		}
	}
	err = httpwire.StreamReports(w, r.Context(), report, streaming, statsInterval, next, func(st *stats.DockerStats) any {
		out := *st
		if !strings.HasPrefix(out.Name, "/") {
			out.Name = "/" + out.Name
		}
		return &out
	})
	if err != nil {
		s.logger.Debug("docker stats stream ended", "container", name, "err", err)
	}
}

// containerTop answers docker top.
func (s *server) containerTop(w http.ResponseWriter, r *http.Request) {
	// dockerd's top: ps on the host with the client's options, the
	// container's lines kept (host PIDs).
	res, err := s.deps.ContainerIO.HostTop(r.Context(), pathParam(r, "name"), r.URL.Query().Get("ps_args"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, containertypes.TopResponse{Titles: res.Titles, Processes: res.Processes})
}
