package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/shared/apierror"
	"github.com/berth-project/berth/shared/server"
)

// errInternalPanic answers a request whose handler panicked.
var errInternalPanic = errors.New("internal server error")

// errNoRoute answers paths and methods the engine does not serve.
var errNoRoute = errors.New("no such route")

// statusOf maps a core error to its HTTP status: the one place where domain
// errors get their wire meaning.
func statusOf(err error) int {
	switch {
	case errors.Is(err, core.ErrNotModified):
		return http.StatusNotModified
	case errors.Is(err, core.ErrNoSuchImage),
		errors.Is(err, core.ErrNoSuchContainer),
		errors.Is(err, core.ErrNoSuchPod),
		errors.Is(err, core.ErrNoSuchExecSession),
		errors.Is(err, core.ErrNoSuchVolume),
		errors.Is(err, core.ErrNoSuchSecret),
		errors.Is(err, core.ErrNoSuchPath),
		errors.Is(err, core.ErrNoSuchManifestList),
		errors.Is(err, core.ErrNoSuchArtifact),
		errors.Is(err, core.ErrNoSuchNetwork),
		errors.Is(err, core.ErrNoSuchQuadlet):
		return http.StatusNotFound
	case errors.Is(err, core.ErrNameInUse),
		errors.Is(err, core.ErrStateConflict),
		errors.Is(err, core.ErrImageInUse),
		errors.Is(err, core.ErrVolumeInUse),
		errors.Is(err, core.ErrSecretInUse),
		errors.Is(err, core.ErrNetworkInUse),
		errors.Is(err, core.ErrSubnetInUse),
		errors.Is(err, core.ErrAddressInUse),
		errors.Is(err, core.ErrAmbiguous):
		return http.StatusConflict
	case errors.Is(err, core.ErrTooLarge):
		// Before ErrInvalidArgument: an over-limit archive may also be
		// reported against the argument that carried it.
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, server.ErrSlowBody):
		return http.StatusRequestTimeout
	case errors.Is(err, core.ErrInvalidArgument):
		return http.StatusBadRequest
	default:
		return http.StatusInternalServerError
	}
}

// writeError answers with err's status and the engine error body
// ({cause, message, response}); 304 carries no body.
func writeError(w http.ResponseWriter, err error) {
	status := statusOf(err)
	if status == http.StatusNotModified {
		w.WriteHeader(status)
		return
	}
	apierror.WriteEngine(w, status, err)
}

// writeJSON answers with status and body encoded as JSON.
func writeJSON(w http.ResponseWriter, status int, body any) {
	encoded, err := json.Marshal(body)
	if err != nil {
		apierror.WriteEngine(w, http.StatusInternalServerError, fmt.Errorf("encoding response: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(encoded, '\n'))
}

// writeExists answers an exists route from the lookup's error: 204 when
// err is nil; 404 with the error body when the object does not exist
// (notFound is its domain error) or the name cannot name one; any other
// error as itself. Podman's clients decode the 404 body.
func writeExists(w http.ResponseWriter, err error, notFound error) {
	switch {
	case err == nil:
		writeNoContent(w)
	case errors.Is(err, notFound):
		apierror.WriteEngine(w, http.StatusNotFound, err)
	case errors.Is(err, core.ErrInvalidArgument):
		apierror.WriteEngine(w, http.StatusNotFound, fmt.Errorf("%w: %w", notFound, err))
	default:
		writeError(w, err)
	}
}

// writeNoContent answers 204 (exists endpoints and the like).
func writeNoContent(w http.ResponseWriter) {
	w.WriteHeader(http.StatusNoContent)
}

// notFound answers unknown paths with the engine error body.
func notFound(w http.ResponseWriter, r *http.Request) {
	apierror.WriteEngine(w, http.StatusNotFound, fmt.Errorf("%s %s: %w", apierror.Echo(r.Method), apierror.Echo(r.URL.Path), errNoRoute))
}

// methodNotAllowed answers a path that the router knows, called with another
// method. It is a 405 only when a route names the path's last segment
// literally (GET /containers/create); when every route the path matches
// took its last segment as a parameter (DELETE /images/{name:.*} matching
// GET /images/search), the request is for a route the engine does not
// serve, and gets the same 404 as any unknown path.
func (s *Server) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	path := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
	for _, pattern := range s.patterns {
		last := pattern[len(pattern)-1]
		if strings.Contains(last, "{") {
			continue
		}
		if _, ok := matchSegments(pattern, path); ok {
			apierror.WriteEngine(w, http.StatusMethodNotAllowed, fmt.Errorf("method %s not allowed for %s", apierror.Echo(r.Method), apierror.Echo(r.URL.Path)))
			return
		}
	}
	notFound(w, r)
}

// routePatterns lists the path of every route of mux, split into segments.
func routePatterns(mux chi.Routes) [][]string {
	var out [][]string
	_ = chi.Walk(mux, func(_, pattern string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		out = append(out, strings.Split(strings.TrimPrefix(strings.TrimSuffix(pattern, "/"), "/"), "/"))
		return nil
	})
	return out
}

// pathParam returns a path parameter, unescaped (clients escape slashes in
// image references as %2F).
func pathParam(r *http.Request, key string) string {
	raw := chi.URLParam(r, key)
	if unescaped, err := url.PathUnescape(raw); err == nil {
		return unescaped
	}
	return raw
}
