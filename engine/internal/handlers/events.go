package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/berth-project/berth/engine/internal/backend/platform/events"
	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/httpwire"
)

// EventSource reads the engine's events (events.Bus implements it).
type EventSource interface {
	Read(ctx context.Context, opts events.ReadOptions, emit func(events.Event) error) error
}

// eventsQuery are GetEvents' parameters.
type eventsQuery struct {
	Since   string              `query:"since"`
	Until   string              `query:"until"`
	Stream  bool                `query:"stream"`
	Filters map[string][]string `query:"filters"`
}

// getEvents answers JSON lines of events in Podman's shape: past ones
// (with since/until, or stream=false) and, while streaming, new ones.
func (s *Server) getEvents(w http.ResponseWriter, r *http.Request) {
	q := eventsQuery{Stream: true}
	if !queryInto(w, r, &q) {
		return
	}
	filter, err := events.ParseFilter(q.Filters)
	if err != nil {
		writeError(w, core.InvalidArgument("filters", err))
		return
	}
	opts := events.ReadOptions{Filter: filter, Stream: q.Stream}
	now := time.Now()
	if q.Since != "" {
		if opts.Since, err = parseInputTime(q.Since, true, now); err != nil {
			writeError(w, core.InvalidArgument("since", err))
			return
		}
	}
	if q.Until != "" {
		if opts.Until, err = parseInputTime(q.Until, false, now); err != nil {
			writeError(w, core.InvalidArgument("until", err))
			return
		}
	}
	enc, rc := httpwire.BeginJSONLines(w)
	v4Client := oldFilterForm(chi.URLParam(r, "version"))
	err = s.deps.Events.Read(r.Context(), opts, func(e events.Event) error {
		if v4Client && !events.DecodableByV4(e) {
			return nil
		}
		if err := enc.Encode(e.Message()); err != nil {
			return err
		}
		return rc.Flush()
	})
	if err != nil && r.Context().Err() == nil {
		s.logger.Debug("event stream ended", "err", err)
	}
}
