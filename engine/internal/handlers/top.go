package handlers

import (
	"net/http"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/execution/top"
	"github.com/berth-project/berth/engine/internal/httpwire"
)

// topQuery are TopContainer's parameters.
type topQuery struct {
	PsArgs []string `query:"ps_args"`
	Stream bool     `query:"stream"`
	Delay  int64    `query:"delay"`
}

// containerTop answers the container's process table ({Titles, Processes}),
// once or every delay seconds while streaming.
func (s *Server) containerTop(w http.ResponseWriter, r *http.Request) {
	q := topQuery{Delay: 5}
	if !queryInto(w, r, &q) {
		return
	}
	if !intervalValid(w, "delay", q.Delay) {
		return
	}
	name := pathParam(r, "name")
	res, err := s.deps.ContainerIO.Top(r.Context(), name, q.PsArgs)
	if err != nil {
		writeError(w, err)
		return
	}
	if !q.Stream {
		writeJSON(w, http.StatusOK, res)
		return
	}
	_ = httpwire.StreamReports(w, r.Context(), res, true, time.Duration(q.Delay)*time.Second, func(*top.Result) (*top.Result, error) {
		return s.deps.ContainerIO.Top(r.Context(), name, q.PsArgs)
	}, func(res *top.Result) any { return res })
}
