package handlers

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/berth-project/berth/engine/internal/backend/execution/containerio"
	"github.com/berth-project/berth/engine/internal/backend/execution/logs"
	"github.com/berth-project/berth/engine/internal/backend/execution/stats"
	"github.com/berth-project/berth/engine/internal/backend/execution/stream"
	"github.com/berth-project/berth/engine/internal/backend/execution/top"
	"github.com/berth-project/berth/engine/internal/core"
)

// ContainerIO is what the log, attach, resize, stats and top handlers need
// from the engine (containerio.Service implements it).
type ContainerIO interface {
	Logs(ctx context.Context, nameOrID string, opts containerio.LogOptions, emit func(logs.Line) error) error
	Attach(ctx context.Context, nameOrID string) (*containerio.Session, error)
	Resize(ctx context.Context, nameOrID string, height, width uint16) error
	Stats(ctx context.Context, nameOrIDs []string) ([]stats.ContainerStats, error)
	DockerStats(ctx context.Context, nameOrID string, prev *stats.DockerStats) (*stats.DockerStats, error)
	Top(ctx context.Context, nameOrID string, psArgs []string) (*top.Result, error)
}

// registerLogRoutes serves LogsFromContainer.
func registerLogRoutes(r chi.Router, s *Server) {
	if s.deps.ContainerIO == nil || s.deps.Containers == nil {
		return
	}
	r.Get("/containers/{name}/logs", s.containerLogs)
}

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
	if err := decodeQuery(r, &q); err != nil {
		writeError(w, err)
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
	if _, err := s.deps.Containers.Lookup(r.Context(), name); err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/vnd.docker.multiplexed-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	mux := stream.NewMux(w, rc.Flush)
	var frame []byte
	err = s.deps.ContainerIO.Logs(r.Context(), name, opts, func(l logs.Line) error {
		id := stream.Stdout
		if l.Stream == logs.Stderr {
			if !q.Stderr {
				return nil
			}
			id = stream.Stderr
		} else if !q.Stdout {
			return nil
		}
		frame = frame[:0]
		if q.Timestamps {
			frame = l.Time.AppendFormat(frame, time.RFC3339)
			frame = append(frame, ' ')
		}
		frame = append(frame, l.Text...)
		if !l.Partial {
			frame = append(frame, '\n')
		}
		return mux.WriteFrame(id, frame)
	})
	if err != nil && r.Context().Err() == nil {
		// The status is sent; all that is left is to log and end the stream.
		s.logger.Warn("streaming container logs", "container", name, "err", err)
	}
}

// parseInputTime reads a time parameter the way Podman does: RFC 3339
// (with or without zone or fraction), a date, Unix seconds with an optional
// fraction, or a Go duration counted back from now (since) or forward
// (until).
func parseInputTime(v string, since bool, now time.Time) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, time.RFC3339, "2006-01-02T15:04:05", "2006-01-02T15:04:05.999999999", "2006-01-02Z07:00", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil && !math.IsNaN(secs) && !math.IsInf(secs, 0) && math.Abs(secs) < 1e12 {
		whole, frac := math.Modf(secs)
		return time.Unix(int64(whole), int64(frac*1e9)).UTC(), nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		if since {
			return now.Add(-d), nil
		}
		return now.Add(d), nil
	}
	return time.Time{}, fmt.Errorf("%q is not a time, Unix timestamp or duration", v)
}
