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

// runHealthCheck runs the check once: 200 with the result, 409 when the
// container is not running or has no healthcheck.
func (s *Server) runHealthCheck(w http.ResponseWriter, r *http.Request) {
	answerNamed(w, r, s.deps.Health.Run)
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
