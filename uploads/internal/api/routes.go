package api

import (
	"net/http"

	"github.com/berth-project/berth/shared/server"
	"github.com/berth-project/berth/uploads/internal/store"
	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
)

// routes is the whole API surface: each path, its method and the checks before the
// handler, in order.
func (s *Server) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(server.RequestID, server.AccessLog(s.logger), server.Recover(s.logger, s.panicked), s.cfg.Metrics.Middleware, middleware.GetHead)
	r.NotFound(s.routeNotFound)

	r.Get("/healthz", server.Healthz().ServeHTTP)
	r.Get("/readyz", server.Readyz(s.cfg.ReadyChecks).ServeHTTP)
	r.Get("/metrics", s.cfg.Metrics.Handler().ServeHTTP)

	open := s.requireState(store.StatusOpen)
	r.Route("/v1/uploads", func(r chi.Router) {
		r.Use(s.authenticate)
		r.Post("/", s.createUpload)
		r.Get("/", s.listUploads)
		r.Route("/{uuid}", func(r chi.Router) {
			r.Use(s.parseUUID)
			r.Delete("/", s.deleteUpload) // 204 whether or not it exists
			r.Group(func(r chi.Router) {
				r.Use(s.loadUpload)
				r.Get("/", s.getUpload)
				r.With(s.requireState(store.StatusProcessing, store.StatusDone)).Get("/errors", s.listErrors)
				r.With(s.requireState(store.StatusProcessing, store.StatusDone)).Get("/images", s.listImages)
				r.With(open).Post("/markForProcessing", s.markForProcessing)
				r.Route("/files", func(r chi.Router) {
					r.Use(s.filePath, open)
					r.Get("/", s.getFile)
					r.Get("/*", s.getFile)
					r.With(requireContentType(octetStream)).Put("/", s.putFile)
					r.With(requireContentType(octetStream)).Put("/*", s.putFile)
					r.Delete("/", s.deleteFile)
					r.Delete("/*", s.deleteFile)
				})
			})
		})
	})
	r.MethodNotAllowed(methodNotAllowed(r))
	return r
}
