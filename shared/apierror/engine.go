// Package apierror writes the error bodies of Berth's two APIs: the engine's
// libpod-compatible {"cause","message","response"} body and the uploads
// service's RFC 7807 problem details.
package apierror

import (
	"encoding/json"
	"net/http"
)

// EngineError is the error body of the libpod API. Podman clients read Cause
// to recognise well-known conditions ("no such container") and show Message.
type EngineError struct {
	Cause    string `json:"cause"`
	Message  string `json:"message"`
	Response int    `json:"response"`
}

// Error returns the message, so a decoded body can be returned as an error
// (both EngineError and *EngineError satisfy the error interface).
func (e EngineError) Error() string {
	if e.Message != "" {
		return e.Message
	}
	return e.Cause
}

// NewEngineError builds the body WriteEngine sends for err: Message is
// err.Error() and Cause the text of the innermost wrapped error. A nil err
// yields the status text in both fields.
func NewEngineError(status int, err error) EngineError {
	if err == nil {
		text := http.StatusText(status)
		return EngineError{Cause: text, Message: text, Response: status}
	}
	return EngineError{Cause: RootCause(err).Error(), Message: err.Error(), Response: status}
}

// RootCause follows err's wrap chain down to the innermost error. Where an
// error wraps several (errors.Join), the first branch is followed.
func RootCause(err error) error {
	for err != nil {
		var next error
		switch wrapped := err.(type) {
		case interface{ Unwrap() error }:
			next = wrapped.Unwrap()
		case interface{ Unwrap() []error }:
			for _, candidate := range wrapped.Unwrap() {
				if candidate != nil {
					next = candidate
					break
				}
			}
		}
		if next == nil {
			return err
		}
		err = next
	}
	return err
}

// WriteEngine answers with status and an EngineError body describing err,
// with Content-Type application/json.
// A status outside 200-599 is sent as 500.
func WriteEngine(w http.ResponseWriter, status int, err error) {
	status = validStatus(status)
	writeJSON(w, "application/json", status, NewEngineError(status, err))
}

// writeJSON encodes body; body types in this package always encode.
func writeJSON(w http.ResponseWriter, contentType string, status int, body any) {
	encoded, err := json.Marshal(body)
	if err != nil {
		encoded = []byte(`{}`)
	}
	header := w.Header()
	header.Set("Content-Type", contentType)
	header.Set("X-Content-Type-Options", "nosniff")
	header.Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(append(encoded, '\n'))
}

// validStatus returns status, or 500 when status cannot carry an error body:
// not a valid HTTP status code, or an informational 1xx one.
func validStatus(status int) int {
	if status < 200 || status > 599 {
		return http.StatusInternalServerError
	}
	return status
}
