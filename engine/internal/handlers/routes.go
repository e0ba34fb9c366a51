package handlers

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/berth-project/berth/engine/api"
	"github.com/berth-project/berth/shared/server"
	"github.com/berth-project/berth/shared/swagger"
)

// routes is the map of the engine API. Every libpod route is served under
// /v{version}/libpod (any version string) and unversioned /libpod. A path
// parameter written {name:.*} may contain slashes (image references); the
// slashPaths middleware makes that work for clients that do not escape them.
//
// Each resource group registers its routes in its own file; add one line to
// libpodRoutes for a new group.
func (s *Server) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(server.RequestID)
	// Every answer, libpod's, Docker's, a 404 or a panic's, carries
	// Podman's X-Reference-Id.
	r.Use(server.ReferenceID)
	r.Use(server.Recover(s.logger, func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, errInternalPanic)
	}))
	r.Use(server.AccessLog(s.logger))
	r.Use(s.metrics.Middleware)
	r.Use(apiHeaders)

	r.Method(http.MethodGet, "/metrics", s.metrics.Handler())
	r.Method(http.MethodGet, "/healthz", server.Healthz())
	r.Method(http.MethodGet, "/readyz", server.Readyz(s.deps.Ready))
	// Docker-style clients ping at the root before choosing a prefix.
	r.Get("/_ping", s.ping)
	r.Head("/_ping", s.ping)

	r.Route("/v{version}/libpod", s.libpodRoutes)
	r.Route("/libpod", s.libpodRoutes)

	r.NotFound(s.dockerOrNotFound)
	r.MethodNotAllowed(s.methodNotAllowed)
	s.patterns = routePatterns(r)
	return slashPaths(r)
}

// libpodRoutes registers every resource group under one prefix.
func (s *Server) libpodRoutes(r chi.Router) {
	r.NotFound(notFound)
	r.MethodNotAllowed(s.methodNotAllowed)
	r.Get("/swagger", swagger.ServeSwagger(s.cfg.SwaggerSpec, api.Swagger))
	registerSystemRoutes(r, s)
	registerImageRoutes(r, s)
	registerImageTransferRoutes(r, s)
	registerManifestRoutes(r, s)
	registerArtifactRoutes(r, s)
	registerContainerRoutes(r, s)
	registerContainerFileRoutes(r, s)
	registerVolumeRoutes(r, s)
	registerSecretRoutes(r, s)
	registerPodRoutes(r, s)
	registerNetworkRoutes(r, s)
	registerLogRoutes(r, s)
	registerAttachRoutes(r, s)
	registerExecRoutes(r, s)
	registerStatsRoutes(r, s)
	registerTopRoutes(r, s)
	registerEventRoutes(r, s)
	registerHealthcheckRoutes(r, s)
	registerBuildRoutes(r, s)
	registerQuadletRoutes(r, s)
	registerGenerateRoutes(r, s)
	registerKubePlayRoutes(r, s)
	registerKubeGenerateRoutes(r, s)
}

// dockerOrNotFound hands a path outside libpod's tree to the Docker
// front door: "/v1.41/containers/json" and "/containers/json" are
// Docker's, "/v4.3.1/libpod/..." and "/libpod/..." stay libpod's (and get
// its 404 here).
func (s *Server) dockerOrNotFound(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Docker == nil || isLibpodPath(r.URL.Path) {
		notFound(w, r)
		return
	}
	s.cfg.Docker.ServeHTTP(w, r)
}

// isLibpodPath: /libpod/... or /v{version}/libpod/...
func isLibpodPath(p string) bool {
	if strings.HasPrefix(p, "/libpod/") || p == "/libpod" {
		return true
	}
	if !strings.HasPrefix(p, "/v") {
		return false
	}
	_, rest, _ := strings.Cut(p[1:], "/")
	return rest == "libpod" || strings.HasPrefix(rest, "libpod/")
}
