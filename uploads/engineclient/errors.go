package engineclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"
)

// Sentinel errors. An *Error from an HTTP error response matches the one for
// its status with errors.Is; ErrUnavailable matches every failure where no
// HTTP response came back (connection refused or reset, timeout, DNS).
var (
	// ErrUnavailable: the engine could not be reached or did not answer.
	ErrUnavailable = errors.New("engine unavailable")
	// ErrBadRequest: the engine answered 400 (bad parameters, corrupt archive).
	ErrBadRequest = errors.New("bad request")
	// ErrNotFound: the engine answered 404 (no such object).
	ErrNotFound = errors.New("not found")
	// ErrConflict: the engine answered 409 (name in use, state conflict).
	ErrConflict = errors.New("conflict")
	// ErrServer: the engine answered with a 5xx status.
	ErrServer = errors.New("engine server error")
)

const (
	// maxErrorBody bounds how much of an error response is read.
	maxErrorBody = 64 << 10
	// maxErrorMessage bounds the message kept from an error body that is not
	// the engine's JSON shape (a proxy's HTML page, say).
	maxErrorMessage = 512
)

// Error is an HTTP error response of the engine, decoded from its
// {"cause","message","response"} body.
type Error struct {
	// Op is the method and path of the request, e.g. "POST /images/load".
	Op string
	// Status is the HTTP status of the response.
	Status int
	// Cause is the innermost error the engine reported.
	Cause string
	// Message is the engine's full error message.
	Message string
}

// Error implements error.
func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = e.Cause
	}
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	return fmt.Sprintf("engine %s: %d: %s", e.Op, e.Status, msg)
}

// Is lets errors.Is match the sentinel for the response status.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrBadRequest:
		return e.Status == http.StatusBadRequest
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrConflict:
		return e.Status == http.StatusConflict
	case ErrServer:
		return e.Status >= 500
	}
	return false
}

// engineErrorBody is the engine's error body on the wire.
type engineErrorBody struct {
	Cause    string `json:"cause"`
	Message  string `json:"message"`
	Response int    `json:"response"`
}

// decodeError turns a non-2xx response into an *Error. A body that is not the
// engine's JSON error shape is kept as the message, trimmed.
func decodeError(method, path string, resp *http.Response) error {
	apiErr := &Error{Op: method + " " + path, Status: resp.StatusCode}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var body engineErrorBody
	if err := json.Unmarshal(raw, &body); err == nil && (body.Message != "" || body.Cause != "") {
		apiErr.Cause, apiErr.Message = body.Cause, body.Message
		return apiErr
	}
	apiErr.Message = strings.TrimSpace(string(raw))
	if len(apiErr.Message) > maxErrorMessage {
		cut := maxErrorMessage
		for cut > 0 && !utf8.RuneStart(apiErr.Message[cut]) {
			cut--
		}
		apiErr.Message = apiErr.Message[:cut] + "..."
	}
	return apiErr
}
