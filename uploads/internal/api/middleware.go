package api

import (
	"context"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/berth-project/berth/shared/auth"
	"github.com/berth-project/berth/uploads/internal/files"
	"github.com/berth-project/berth/uploads/internal/store"
	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
)

type ctxKey int

const (
	keyUUID ctxKey = iota
	keyUpload
	keyPath
)

func uploadID(r *http.Request) uuid.UUID {
	id, _ := r.Context().Value(keyUUID).(uuid.UUID)
	return id
}

func uploadFrom(r *http.Request) store.Upload {
	u, _ := r.Context().Value(keyUpload).(store.Upload)
	return u
}

func filePathFrom(r *http.Request) string {
	p, _ := r.Context().Value(keyPath).(string)
	return p
}

func with(r *http.Request, key ctxKey, value any) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), key, value))
}

// parseUUID accepts only the canonical 36-character form (any case): 400 otherwise.
func (s *Server) parseUUID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw := chi.URLParam(r, "uuid")
		id, err := uuid.Parse(raw)
		if err != nil || len(raw) != 36 {
			s.writeError(w, r, &requestError{
				status: http.StatusBadRequest, slug: "invalid-uuid", title: "Malformed upload UUID",
				detail: fmt.Sprintf("%q is not a UUID (want the form xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)", raw),
			})
			return
		}
		next.ServeHTTP(w, with(r, keyUUID, id))
	})
}

// loadUpload fetches the upload named in the path: 404 when there is none.
func (s *Server) loadUpload(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, err := s.store.Get(r.Context(), uploadID(r))
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		next.ServeHTTP(w, with(r, keyUpload, u))
	})
}

// requireState answers 409 unless the loaded upload is in one of the allowed states.
func (s *Server) requireState(allowed ...store.Status) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := store.CheckState(uploadFrom(r), allowed...); err != nil {
				s.writeError(w, r, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// filePath validates the file path after ".../files/". It reads the escaped form of the
// URL, as sent on the wire, so that an encoded slash or dot cannot slip past in decoding:
// 400 for any invalid spelling.
func (s *Server) filePath(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The route matched /v1/uploads/{uuid}/files[/...]: the path is whatever follows
		// the fifth slash.
		parts := strings.SplitN(r.URL.EscapedPath(), "/", 6)
		escaped := ""
		if len(parts) == 6 {
			escaped = parts[5]
		}
		p, err := files.FromEscaped(escaped)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		next.ServeHTTP(w, with(r, keyPath, p))
	})
}

const octetStream = "application/octet-stream"

// requireContentType answers 415 unless the body is declared as the given media type.
func requireContentType(want string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got := r.Header.Get("Content-Type")
			mt, _, err := mime.ParseMediaType(got)
			if err != nil || mt != want {
				writeProblem(w, r, &requestError{
					status: http.StatusUnsupportedMediaType, slug: "unsupported-media-type", title: "Unsupported media type",
					detail: fmt.Sprintf("Content-Type must be %s, got %q", want, got),
				})
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// authenticate requires "Authorization: Bearer <token>" with a known token when tokens
// are configured: 401 otherwise.
func (s *Server) authenticate(next http.Handler) http.Handler {
	if s.auth == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := auth.Bearer(r)
		if !ok || !s.auth.Valid(token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="berth-uploads"`)
			detail := "a valid bearer token is required"
			if r.Header.Get("Authorization") == "" {
				detail = "missing Authorization: Bearer <token> header"
			}
			writeProblem(w, r, &requestError{status: http.StatusUnauthorized, slug: "unauthorized", title: "Unauthorized", detail: detail})
			return
		}
		next.ServeHTTP(w, r)
	})
}
