package handlers

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/execution/containerio"
	"github.com/berth-project/berth/engine/internal/backend/execution/stream"
	"github.com/berth-project/berth/engine/internal/core"
)

// logsQuery are LogsFromContainer's parameters.
type logsQuery struct {
	Follow     bool   `query:"follow"`
	Stdout     bool   `query:"stdout"`
	Stderr     bool   `query:"stderr"`
	Since      string `query:"since"`
	Until      string `query:"until"`
	Timestamps bool   `query:"timestamps"`
	Tail       string `query:"tail"`
}

// containerLogs streams a container's log in the multiplexed frame format
// (libpod clients always get frame headers, with or without a terminal).
func (s *Server) containerLogs(w http.ResponseWriter, r *http.Request) {
	q := logsQuery{Tail: "all"}
	if !queryInto(w, r, &q) {
		return
	}
	if !q.Stdout && !q.Stderr {
		writeError(w, core.InvalidArgument("stdout", errors.New("choose at least one of stdout and stderr")))
		return
	}
	opts := containerio.LogOptions{Tail: -1, Follow: q.Follow}
	if q.Tail != "all" && q.Tail != "" {
		n, err := strconv.ParseInt(q.Tail, 10, 64)
		if err != nil {
			writeError(w, core.InvalidArgument("tail", fmt.Errorf("%q is not a number or \"all\"", q.Tail)))
			return
		}
		// Negative means all, as Podman reads it.
		opts.Tail = int(max(min(n, math.MaxInt32), -1))
	}
	var err error
	if q.Since != "" {
		if opts.Since, err = parseInputTime(q.Since, true, time.Now()); err != nil {
			writeError(w, core.InvalidArgument("since", err))
			return
		}
	}
	if q.Until != "" && q.Until != "0" {
		if opts.Until, err = parseInputTime(q.Until, false, time.Now()); err != nil {
			writeError(w, core.InvalidArgument("until", err))
			return
		}
	}
	name := pathParam(r, "name")
	c, err := s.deps.Containers.Lookup(r.Context(), name)
	if err == nil {
		err = c.LogsReadable()
	}
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/vnd.docker.multiplexed-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	var stamp func([]byte, time.Time) []byte
	if q.Timestamps {
		stamp = func(frame []byte, t time.Time) []byte { return t.AppendFormat(frame, time.RFC3339) }
	}
	err = s.deps.ContainerIO.Logs(r.Context(), name, opts, containerio.LogFrames(q.Stdout, q.Stderr, stamp, stream.NewMux(w, rc.Flush).WriteFrame))
	if err != nil && r.Context().Err() == nil {
		// The status is sent; all that is left is to log and end the stream.
		s.logger.Warn("streaming container logs", "container", name, "err", err)
	}
}
