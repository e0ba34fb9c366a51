package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"
)

// RequestIDHeader carries the request id in requests and responses.
const RequestIDHeader = "X-Request-Id"

// maxRequestIDLen bounds a client-chosen request id.
const maxRequestIDLen = 128

// requestIDKey is the context key of the request id.
type requestIDKey struct{}

// RequestID gives every request an id: the client's X-Request-Id when it is
// printable ASCII of at most 128 bytes, else a new random one. The id is put
// into the request context (see RequestIDFrom) and the response header, so
// a client's report can be matched with the server's logs. A request that
// already has an id in its context keeps it, so it may run twice.
func RequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if RequestIDFrom(r.Context()) != "" {
			// An outer RequestID chose it (a guard in front of the router).
			next.ServeHTTP(w, r)
			return
		}
		id := r.Header.Get(RequestIDHeader)
		if !validRequestID(id) {
			id = newRequestID()
		}
		w.Header().Set(RequestIDHeader, id)
		next.ServeHTTP(w, r.WithContext(WithRequestID(r.Context(), id)))
	})
}

// ReferenceIDHeader is Podman's correlation header: its API server sets it
// on every response.
const ReferenceIDHeader = "X-Reference-Id"

// ReferenceID sets X-Reference-Id on every response, as Podman's API server
// does: the request's own X-Reference-Id when it is printable ASCII of at
// most 128 bytes (echoed, as Podman echoes it), else the request id that
// RequestID chose, so that a client quoting the reference names the lines of
// the server's log. It must run after RequestID.
func ReferenceID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(ReferenceIDHeader)
		if !validRequestID(id) {
			id = RequestIDFrom(r.Context())
			if id == "" {
				id = newRequestID()
			}
			r.Header.Set(ReferenceIDHeader, id)
		}
		w.Header().Set(ReferenceIDHeader, id)
		next.ServeHTTP(w, r)
	})
}

// WithRequestID returns ctx carrying id, for code that makes requests outside
// an HTTP handler (background workers) and wants to log with an id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestIDFrom returns the request id in ctx, or "" when there is none.
func RequestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// validRequestID accepts non-empty printable ASCII ids of bounded length.
func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// newRequestID returns 128 random bits in hex.
func newRequestID() string {
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	return hex.EncodeToString(raw[:])
}

// Recover turns a panic in a handler into a logged error and, while no
// response has been started, into the response onPanic writes (a plain 500
// when onPanic is nil). When the response has already started, or the
// connection was hijacked, the connection is aborted instead so the client
// cannot take a truncated body for a complete one. http.ErrAbortHandler
// panics pass through unlogged, as net/http intends.
func Recover(logger *slog.Logger, onPanic func(http.ResponseWriter, *http.Request)) func(http.Handler) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := newRecorder(w)
			defer func() {
				recovered := recover()
				if recovered == nil {
					return
				}
				if err, ok := recovered.(error); ok && errors.Is(err, http.ErrAbortHandler) {
					panic(recovered)
				}
				logger.ErrorContext(r.Context(), "panic in handler",
					"panic", fmt.Sprint(recovered),
					"method", r.Method,
					"path", r.URL.Path,
					"request_id", RequestIDFrom(r.Context()),
					"stack", string(debug.Stack()))
				if rec.wroteHeader || rec.hijacked {
					panic(http.ErrAbortHandler)
				}
				if onPanic == nil {
					http.Error(rec, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
					return
				}
				onPanic(rec, r)
			}()
			next.ServeHTTP(rec, r)
		})
	}
}

// AccessLog logs one line per request once it has been answered: method,
// path, status, bytes, duration, request id and remote address. Probes
// answered without an error (_ping, /healthz, /readyz, /metrics), which
// clients and orchestrators send every few seconds, log at debug. Hijacked
// connections are logged when their handler returns, marked hijacked; a
// request whose handler panicked is logged as such (and status 500 when it
// had not answered yet) before the panic goes on to Recover or net/http.
func AccessLog(logger *slog.Logger) func(http.Handler) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			rec := newRecorder(w)
			completed := false
			defer func() {
				status := rec.Status()
				if status == 0 && !rec.hijacked {
					status = http.StatusOK
					if !completed {
						status = http.StatusInternalServerError
					}
				}
				level := slog.LevelInfo
				if isProbe(r.URL.Path) && status < http.StatusBadRequest {
					level = slog.LevelDebug
				}
				if !logger.Enabled(r.Context(), level) {
					return
				}
				attrs := []any{
					"method", r.Method,
					"path", r.URL.Path,
					"status", status,
					"bytes", rec.bytes,
					"duration", time.Since(start),
					"request_id", RequestIDFrom(r.Context()),
					"remote", r.RemoteAddr,
				}
				if rec.hijacked {
					attrs = append(attrs, "hijacked", true)
				}
				if !completed {
					attrs = append(attrs, "panicked", true)
				}
				logger.Log(r.Context(), level, "request", attrs...)
			}()
			next.ServeHTTP(rec, r)
			completed = true
		})
	}
}

// isProbe reports whether path is a liveness, readiness or metrics probe,
// or an engine _ping under any API prefix.
func isProbe(path string) bool {
	switch path {
	case "/healthz", "/readyz", "/metrics":
		return true
	}
	return path == "/_ping" || strings.HasSuffix(path, "/_ping")
}
