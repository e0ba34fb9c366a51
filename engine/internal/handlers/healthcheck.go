package handlers

import (
	"context"
	"errors"
	"net/http"

	"github.com/berth-project/berth/engine/internal/backend/lifecycle/restart"
	"github.com/berth-project/berth/engine/internal/core"
)

// HealthChecker runs a container's healthcheck (health.Checker implements it).
type HealthChecker interface {
	Run(ctx context.Context, nameOrID string) (core.HealthCheckResults, error)
}

// errNoRestart is the 404 answer of shouldrestart for a container its
// policy does not restart (what Podman answers).
var errNoRestart = errors.New("container will not be restarted")

// shouldRestart answers 204 when the container's restart policy would start
// it again, 404 otherwise.
func (s *Server) shouldRestart(w http.ResponseWriter, r *http.Request) {
	c, err := s.deps.Containers.Lookup(r.Context(), pathParam(r, "name"))
	if err != nil {
		writeError(w, err)
		return
	}
	if !restart.Decide(c) {
		writeError(w, errors.Join(errNoRestart, core.ErrNoSuchContainer))
		return
	}
	writeNoContent(w)
}
