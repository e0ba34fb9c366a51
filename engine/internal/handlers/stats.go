package handlers

import (
	"errors"
	"net/http"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/execution/stats"
	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/httpwire"
)

// dockerStatsInterval is how often the per-container route reports while
// streaming (Podman's period for it).
const dockerStatsInterval = 5 * time.Second

// dockerStatsQuery are the per-container route's parameters.
type dockerStatsQuery struct {
	Stream  bool `query:"stream"`
	OneShot bool `query:"one-shot"`
}

// containerStatsDocker answers one container's usage in the Docker shape,
// once or every five seconds while streaming.
func (s *Server) containerStatsDocker(w http.ResponseWriter, r *http.Request) {
	q := dockerStatsQuery{Stream: true}
	if !queryInto(w, r, &q) {
		return
	}
	if q.Stream && q.OneShot {
		writeError(w, core.InvalidArgument("one-shot", errors.New("one-shot needs stream=false")))
		return
	}
	name := pathParam(r, "name")
	report, err := s.deps.ContainerIO.DockerStats(r.Context(), name, nil)
	if err != nil {
		writeError(w, err)
		return
	}
	err = httpwire.StreamReports(w, r.Context(), report, q.Stream, dockerStatsInterval, func(prev *stats.DockerStats) (*stats.DockerStats, error) {
		return s.deps.ContainerIO.DockerStats(r.Context(), name, prev)
	}, func(st *stats.DockerStats) any { return st })
	if err != nil {
		s.logger.Debug("stats stream ended", "container", name, "err", err)
	}
}

// statsQuery are StatsContainer's parameters.
type statsQuery struct {
	Containers []string `query:"containers"`
	Stream     bool     `query:"stream"`
	Interval   int64    `query:"interval"`
}

// statsReport is one line of the stats stream, as podman decodes it; Error
// must be null on success (the client decodes it into an error value).
type statsReport struct {
	Error *struct{}              `json:"Error"`
	Stats []stats.ContainerStats `json:"Stats"`
}

// AppendJSON writes the report as encoding/json would (one line of a
// stats request over every container is sent often enough that
// reflection showed in its profile).
func (r statsReport) AppendJSON(b []byte) []byte {
	if r.Error != nil {
		b = append(b, `{"Error":{},"Stats":`...)
	} else {
		b = append(b, `{"Error":null,"Stats":`...)
	}
	if r.Stats == nil {
		return append(b, "null}"...)
	}
	b = append(b, '[')
	for i := range r.Stats {
		if i > 0 {
			b = append(b, ',')
		}
		b = r.Stats[i].AppendJSON(b)
	}
	return append(b, "]}"...)
}

// containerStats answers JSON lines of usage reports: one, or one each
// interval seconds while streaming.
func (s *Server) containerStats(w http.ResponseWriter, r *http.Request) {
	q := statsQuery{Stream: true, Interval: 5}
	if !queryInto(w, r, &q) {
		return
	}
	if !intervalValid(w, "interval", q.Interval) {
		return
	}
	first, err := s.deps.ContainerIO.Stats(r.Context(), q.Containers)
	if err != nil {
		writeError(w, err)
		return
	}
	err = httpwire.StreamReports(w, r.Context(), first, q.Stream, time.Duration(q.Interval)*time.Second, func([]stats.ContainerStats) ([]stats.ContainerStats, error) {
		return s.deps.ContainerIO.Stats(r.Context(), q.Containers)
	}, func(report []stats.ContainerStats) any {
		if report == nil {
			report = []stats.ContainerStats{}
		}
		return statsReport{Stats: report}
	})
	if err != nil {
		s.logger.Debug("stats stream ended", "err", err)
	}
}
