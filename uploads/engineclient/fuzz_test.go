package engineclient

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeError feeds arbitrary error responses to decodeError: whatever
// the engine (or something in between) answers, the result is an *Error with
// the response's status, matching exactly the sentinel of that status, and a
// bounded message.
func FuzzDecodeError(f *testing.F) {
	f.Add(400, `{"cause":"unexpected EOF","message":"loading image: unexpected EOF","response":400}`)
	f.Add(404, `{"cause":"image not known","message":"busybox: image not known","response":404}`)
	f.Add(500, `{"cause":"","message":"","response":500}`)
	f.Add(409, `{"message":3}`)
	f.Add(502, "<html>bad gateway</html>")
	f.Add(503, "")
	f.Add(418, strings.Repeat("\xff", 600))
	f.Fuzz(func(t *testing.T, status int, body string) {
		if status < 100 || status > 999 {
			status = 400 + (status%100+100)%100
		}
		resp := &http.Response{StatusCode: status, Body: io.NopCloser(strings.NewReader(body))}
		err := decodeError(http.MethodPost, "/images/load", resp)
		var apiErr *Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("decodeError returned %T", err)
		}
		if apiErr.Status != status || apiErr.Op != "POST /images/load" {
			t.Fatalf("error = %+v, want status %d", apiErr, status)
		}
		sentinels := map[error]bool{
			ErrBadRequest: status == 400,
			ErrNotFound:   status == 404,
			ErrConflict:   status == 409,
			ErrServer:     status >= 500,
		}
		for sentinel, want := range sentinels {
			if errors.Is(err, sentinel) != want {
				t.Fatalf("status %d: errors.Is(%v) = %v", status, sentinel, !want)
			}
		}
		if errors.Is(err, ErrUnavailable) {
			t.Fatalf("an HTTP response decoded as ErrUnavailable")
		}
		var engineBody engineErrorBody
		fromEngine := json.Unmarshal([]byte(body), &engineBody) == nil && (engineBody.Message != "" || engineBody.Cause != "")
		if fromEngine && (apiErr.Message != engineBody.Message || apiErr.Cause != engineBody.Cause) {
			t.Fatalf("engine body %q decoded as %+v", body, apiErr)
		}
		if !fromEngine && len(apiErr.Message) > maxErrorMessage+len("...") {
			t.Fatalf("message of %d bytes not cut", len(apiErr.Message))
		}
		if !fromEngine && utf8.ValidString(body) && !utf8.ValidString(apiErr.Message) {
			t.Fatalf("cutting made the message invalid UTF-8: %q", apiErr.Message)
		}
		if err.Error() == "" {
			t.Fatalf("empty error text")
		}
	})
}
