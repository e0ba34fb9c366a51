// This file holds how the handlers answer: error statuses and bodies, JSON,
// text, bare statuses (204 and the like) and exists answers, and the
// streams (JSON lines, flushed writes) that several routes share.

package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/httpwire"
	"github.com/berth-project/berth/shared/apierror"
)

// errInternalPanic answers a request whose handler panicked.
var errInternalPanic = errors.New("internal server error")

// errNoRoute answers paths and methods the engine does not serve.
var errNoRoute = errors.New("no such route")

// writeError answers with err's status and the engine error body
// ({cause, message, response}); 304 carries no body.
func writeError(w http.ResponseWriter, err error) {
	status := httpwire.StatusOf(err)
	if status == http.StatusNotModified {
		w.WriteHeader(status)
		return
	}
	apierror.WriteEngine(w, status, err)
}

// writeJSON answers with status and body encoded as JSON.
func writeJSON(w http.ResponseWriter, status int, body any) {
	if err := httpwire.WriteJSON(w, status, body); err != nil {
		apierror.WriteEngine(w, http.StatusInternalServerError, fmt.Errorf("encoding response: %w", err))
	}
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
			writeMethodNotAllowed(w, r)
			return
		}
	}
	notFound(w, r)
}

// writeMethodNotAllowed answers 405 with the engine error body.
func writeMethodNotAllowed(w http.ResponseWriter, r *http.Request) {
	apierror.WriteEngine(w, http.StatusMethodNotAllowed, fmt.Errorf("method %s not allowed for %s", apierror.Echo(r.Method), apierror.Echo(r.URL.Path)))
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

// finishNoContent answers err, or 204 when there is none.
func finishNoContent(w http.ResponseWriter, err error) {
	finishStatus(w, http.StatusNoContent, err)
}

// finishStatus answers err, or status with no body when there is none.
func finishStatus(w http.ResponseWriter, status int, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(status)
}

// finishText answers err, or 200 with body as contentType when there is
// none (YAML, plain text).
func finishText(w http.ResponseWriter, contentType string, body []byte, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// The handlers of the routes that only call core and answer what it
// returns: the route table binds them to core's methods, so no handler
// method exists just to forward.

// getHandler answers what get returns (200, JSON), or its error.
func getHandler[T any](get func(ctx context.Context) (T, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		out, err := get(r.Context())
		finishJSON(w, http.StatusOK, out, err)
	}
}

// namedHandler answers what get returns for the object the path names
// (200, JSON), or its error.
func namedHandler[T any](get func(ctx context.Context, nameOrID string) (T, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		out, err := get(r.Context(), pathParam(r, "name"))
		finishJSON(w, http.StatusOK, out, err)
	}
}

// namedActionHandler answers 204 once action is done to the object the
// path names, or its error.
func namedActionHandler(action func(ctx context.Context, nameOrID string) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		finishNoContent(w, action(r.Context(), pathParam(r, "name")))
	}
}

// existsHandler answers whether get finds the object the path names: 204,
// or 404 with the error body when the error is missing (see writeExists).
func existsHandler[T any](get func(ctx context.Context, nameOrID string) (T, error), missing error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, err := get(r.Context(), pathParam(r, "name"))
		writeExists(w, err, missing)
	}
}

// finishJSON answers err, or body with status when there is none.
func finishJSON(w http.ResponseWriter, status int, body any, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, status, body)
}

type errorDetail struct {
	Message string `json:"message"`
}

// answerUnstreamed answers a streaming transfer that finished before its
// stream sent anything: a failure gets its own status, success is answered
// by onSuccess. It reports whether it answered; once the stream has begun
// the caller ends the stream itself.
func answerUnstreamed(w http.ResponseWriter, stream *jsonStream, err error, onSuccess func()) bool {
	if stream.started() {
		return false
	}
	if err != nil {
		writeError(w, err)
		return true
	}
	onSuccess()
	return true
}

// jsonStream writes JSON lines, sending the 200 header only with the first
// line, so that a request that fails before any progress still gets its
// error status.
type jsonStream struct {
	mu    sync.Mutex
	w     http.ResponseWriter
	enc   *json.Encoder
	begun bool
}

func newJSONStream(w http.ResponseWriter) *jsonStream {
	return &jsonStream{w: w, enc: json.NewEncoder(w)}
}

func (s *jsonStream) started() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.begun
}

// send writes one line and flushes it.
func (s *jsonStream) send(v any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.begun {
		s.begun = true
		s.w.Header().Set("Content-Type", "application/json")
		s.w.WriteHeader(http.StatusOK)
	}
	if err := s.enc.Encode(v); err != nil {
		return
	}
	_ = http.NewResponseController(s.w).Flush()
}

// progress returns a writer whose every write becomes one stream line.
func (s *jsonStream) progress(line func(text string) any) io.Writer {
	return lineWriter{send: s.send, line: line}
}

// lineWriter makes each write of progress text one line (what line makes
// of the text) and hands it to send: a stream's or a hold's.
type lineWriter struct {
	send func(any)
	line func(string) any
}

func (p lineWriter) Write(b []byte) (int, error) {
	if len(b) > 0 {
		p.send(p.line(string(b)))
	}
	return len(b), nil
}

// streamHoldLimit is how long heldLines waits for the work to start before
// sending what it holds, as Podman 6's pull waits before it streams.
const streamHoldLimit = 5 * time.Second

// heldLines holds a stream's lines until release (or streamHoldLimit), so
// that a request whose work fails before it really starts (a push the
// registry refuses at the first request, a TLS failure) still gets its own
// status and error body instead of a 200 stream ending in an error line.
type heldLines struct {
	mu       sync.Mutex
	stream   *jsonStream
	held     []any
	released bool
	dropped  bool
	timer    *time.Timer
}

// holdLines starts holding lines for stream; call finish when done.
func holdLines(stream *jsonStream) *heldLines {
	h := &heldLines{stream: stream}
	h.timer = time.AfterFunc(streamHoldLimit, h.release)
	return h
}

// send sends v, or holds it until release.
func (h *heldLines) send(v any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		h.stream.send(v)
		return
	}
	h.held = append(h.held, v)
}

// release sends the held lines; later lines go out at once.
func (h *heldLines) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.releaseLocked()
}

func (h *heldLines) releaseLocked() {
	if h.released || h.dropped {
		return
	}
	h.released = true
	for _, v := range h.held {
		h.stream.send(v)
	}
	h.held = nil
}

// finish ends the hold once the work returned. It reports whether the
// response is a stream: lines were released already, or the work succeeded
// (what is held goes out now). A failure before any line went out drops
// the held lines, so that the caller answers the error with its status.
func (h *heldLines) finish(failed bool) (streamed bool) {
	h.timer.Stop()
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.released && failed {
		h.dropped = true
		h.held = nil
		return false
	}
	h.releaseLocked()
	return true
}

// progress returns a writer whose every write becomes one held line.
func (h *heldLines) progress(line func(text string) any) io.Writer {
	return lineWriter{send: h.send, line: line}
}
