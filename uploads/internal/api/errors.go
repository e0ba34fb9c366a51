package api

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/berth-project/berth/shared/apierror"
	"github.com/berth-project/berth/shared/server"
	"github.com/berth-project/berth/uploads/internal/files"
	"github.com/berth-project/berth/uploads/internal/store"
	"github.com/go-chi/chi/v5"
)

// problemBase prefixes the slug of each problem type.
const problemBase = "urn:berth:problem:"

// requestError is a problem found in the request itself (bad query, UUID, media type,
// credentials); it carries its own status.
type requestError struct {
	status      int
	slug, title string
	detail      string
	extra       map[string]any
	// retryAfter, when set, is sent as the Retry-After header (seconds).
	retryAfter int
}

func (e *requestError) Error() string { return e.detail }

// bodyError marks a failure to read the request body (the client went away or sent a
// broken stream), as opposed to a failure of the server's disk.
type bodyError struct{ err error }

func (e *bodyError) Error() string { return "reading request body: " + e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// problemFor is the one place where errors become status codes and problem documents.
func problemFor(err error) (*requestError, bool) {
	var (
		re  *requestError
		se  *store.StateError
		pe  *files.PathError
		fle *files.LimitError
		be  *bodyError
	)
	switch {
	case errors.As(err, &re):
		return re, true
	case errors.Is(err, store.ErrNotFound):
		return &requestError{status: http.StatusNotFound, slug: "upload-not-found", title: "Upload not found", detail: "no upload with this UUID"}, true
	case errors.As(err, &se):
		allowed := make([]string, len(se.Allowed))
		for i, a := range se.Allowed {
			allowed[i] = string(a)
		}
		return &requestError{status: http.StatusConflict, slug: "invalid-state", title: "Operation not allowed in this state", detail: se.Error(),
			extra: map[string]any{"state": string(se.Status), "allowedStates": allowed}}, true
	case errors.As(err, &pe):
		return &requestError{status: http.StatusBadRequest, slug: "invalid-path", title: "Invalid file path", detail: pe.Error(),
			extra: map[string]any{"reason": pe.Reason, "path": apierror.Echo(pe.Path)}}, true
	case errors.Is(err, files.ErrRootRefused):
		return &requestError{status: http.StatusBadRequest, slug: "root-refused", title: "The upload root cannot be written or deleted", detail: err.Error()}, true
	case errors.Is(err, files.ErrNotExist):
		return &requestError{status: http.StatusNotFound, slug: "file-not-found", title: "File not found", detail: "no such file or directory in the upload"}, true
	case errors.Is(err, files.ErrConflict):
		return &requestError{status: http.StatusConflict, slug: "path-conflict", title: "Path conflicts with the upload's tree", detail: err.Error()}, true
	case errors.Is(err, files.ErrIsDir):
		return &requestError{status: http.StatusBadRequest, slug: "is-a-directory", title: "Path is a directory", detail: "raw bytes can only be read from a file; ask for JSON to list a directory"}, true
	case errors.As(err, &fle):
		return limitProblem(fle.Limit, fle.Max), true
	case errors.Is(err, server.ErrSlowBody):
		return &requestError{status: http.StatusRequestTimeout, slug: "slow-body", title: "Request body too slow", detail: err.Error()}, true
	case errors.As(err, &be):
		return &requestError{status: http.StatusBadRequest, slug: "incomplete-body", title: "Request body could not be read", detail: be.Error()}, true
	case store.DiskFull(err):
		detail := "the disk is full. Deleting files or uploads frees space, and writes resume once there is room"
		var fe *files.FullError
		if errors.As(err, &fe) {
			detail = fe.Error() + "; nothing was stored. Deleting files or uploads frees space, and writes resume once there is room"
		}
		return &requestError{status: http.StatusInsufficientStorage, slug: "insufficient-storage", title: "Insufficient storage", detail: detail}, true
	case store.Unavailable(err):
		return &requestError{status: http.StatusServiceUnavailable, slug: "database-unavailable", title: "Database unavailable",
			detail: "the database cannot be reached right now; repeat the request later (a PUT or DELETE answered so may or may not have taken effect; repeating it is safe)", retryAfter: retryAfter}, true
	}
	return nil, false
}

// retryAfter is the Retry-After of answers to a database outage, in seconds.
const retryAfter = 2

func limitProblem(limit string, max int64) *requestError {
	return &requestError{status: http.StatusRequestEntityTooLarge, slug: "limit-exceeded", title: "Limit exceeded",
		detail: fmt.Sprintf("the request exceeds %s (%d); nothing was stored", limit, max),
		extra:  map[string]any{"limit": limit, "max": max}}
}

// writeError answers err as a problem document; unexpected errors are logged and become
// 500 without internals in the body.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	re, ok := problemFor(err)
	if ok && re.status >= 500 {
		s.logger.WarnContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "status", re.status, "err", err)
	}
	if !ok {
		s.logger.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		re = &requestError{status: http.StatusInternalServerError, slug: "internal", title: "Internal server error", detail: "the server failed to handle the request; see its log"}
	}
	writeProblem(w, r, re)
}

// writeProblem writes re, adding the upload's uuid and the file path of the request
// when they are known.
func writeProblem(w http.ResponseWriter, r *http.Request, re *requestError) {
	extra := map[string]any{}
	for k, v := range re.extra {
		extra[k] = v
	}
	if id := uploadID(r); id != [16]byte{} {
		extra["uuid"] = id.String()
	}
	if p := filePathFrom(r); p != "" {
		extra["path"] = apierror.Echo(p)
	}
	if re.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(re.retryAfter))
	}
	apierror.WriteProblem(w, apierror.Problem{Type: problemBase + re.slug, Title: re.title, Status: re.status, Detail: re.detail, Extra: extra})
}

func (s *Server) routeNotFound(w http.ResponseWriter, r *http.Request) {
	writeProblem(w, r, &requestError{status: http.StatusNotFound, slug: "route-not-found", title: "Not found", detail: fmt.Sprintf("no endpoint at %s", apierror.Echo(r.URL.Path))})
}

// methodNotAllowed answers 405 with an Allow header listing every method routed for
// the path (chi's own list is incomplete for nested routers).
func methodNotAllowed(routes chi.Routes) http.HandlerFunc {
	type route struct {
		method   string
		segments []string
	}
	var table []route
	_ = chi.Walk(routes, func(method, pattern string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		table = append(table, route{method, strings.Split(strings.TrimSuffix(pattern, "/"), "/")})
		return nil
	})
	matches := func(segments, path []string) bool {
		for i, s := range segments {
			if s == "*" {
				return true
			}
			if i >= len(path) || (path[i] != s && !(strings.HasPrefix(s, "{") && path[i] != "")) {
				return false
			}
		}
		return len(path) == len(segments)
	}
	return func(w http.ResponseWriter, r *http.Request) {
		path := strings.Split(strings.TrimSuffix(r.URL.EscapedPath(), "/"), "/")
		seen := map[string]bool{}
		var allowed []string
		for _, rt := range table {
			if !seen[rt.method] && matches(rt.segments, path) {
				seen[rt.method] = true
				allowed = append(allowed, rt.method)
			}
		}
		if seen[http.MethodGet] && !seen[http.MethodHead] {
			allowed = append(allowed, http.MethodHead) // served by middleware.GetHead
		}
		sort.Strings(allowed)
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		writeProblem(w, r, &requestError{status: http.StatusMethodNotAllowed, slug: "method-not-allowed", title: "Method not allowed",
			detail: fmt.Sprintf("%s is not allowed on %s; allowed: %s", apierror.Echo(r.Method), apierror.Echo(r.URL.Path), strings.Join(allowed, ", "))})
	}
}

func (s *Server) panicked(w http.ResponseWriter, r *http.Request) {
	writeProblem(w, r, &requestError{status: http.StatusInternalServerError, slug: "internal", title: "Internal server error", detail: "the server failed to handle the request; see its log"})
}
