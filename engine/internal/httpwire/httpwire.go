// Package httpwire holds what both of the engine's front doors, the libpod
// handlers and the Docker API, write on the wire the same way: the status
// a core error maps to, JSON answers, and streamed answers whose status is
// sent with their first bytes. Each front door keeps its own error body
// ({cause, message, response} or Docker's {message}); the statuses behind
// them are one mapping, so one domain error means the same to both.
package httpwire

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/shared/server"
)

// StatusOf maps a core error to its HTTP status: the one place where domain
// errors get their wire meaning.
func StatusOf(err error) int {
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
	case errors.Is(err, core.ErrLogsNotKept):
		return http.StatusNotImplemented
	case errors.Is(err, core.ErrUnauthorized):
		return http.StatusUnauthorized
	default:
		return http.StatusInternalServerError
	}
}

// Pong answers a _ping, GET or HEAD, as both front doors do: 200, plain
// text, not to be cached, and "OK" to a GET. Each door sets its own
// headers before (its Cache-Control words, Docker-Experimental, versions).
func Pong(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Pragma", "no-cache")
	h.Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write([]byte("OK"))
	}
}

// WriteJSON answers status with body as one JSON document and a newline.
// A body that cannot be encoded is not written: the error is returned for
// the caller to answer in its own error body.
func WriteJSON(w http.ResponseWriter, status int, body any) error {
	encoded, err := json.Marshal(body)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	// Sized, the answer goes out in one write instead of 4 KiB chunks.
	w.Header().Set("Content-Length", strconv.Itoa(len(encoded)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(encoded, '\n'))
	return nil
}

// TarAnswer is an http.ResponseWriter's body for a tar stream (an export,
// an archive): the 200 and the tar content type go out with the first
// bytes, so that an error before them still gets its own status.
type TarAnswer struct {
	W http.ResponseWriter
	// Started reports whether the answer has begun; after that an error
	// can only cut the stream.
	Started bool
}

func (t *TarAnswer) Write(p []byte) (int, error) {
	if !t.Started {
		t.Started = true
		t.W.Header().Set("Content-Type", "application/x-tar")
		t.W.WriteHeader(http.StatusOK)
	}
	return t.W.Write(p)
}

// BeginJSONLines answers 200 with the JSON content type and sends the head
// at once (a client of a stream that may stay quiet, events or a wait,
// waits for it); it returns the encoder of the lines and the controller
// that flushes each.
func BeginJSONLines(w http.ResponseWriter) (*json.Encoder, *http.ResponseController) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	return json.NewEncoder(w), rc
}

// JSONAppender is a report line that writes its own JSON, the bytes
// encoding/json would write for it, without reflection (StreamReports
// uses it where a line offers it).
type JSONAppender interface {
	AppendJSON(b []byte) []byte
}

// StreamReports answers 200 and writes report as one JSON line (as line
// shapes it), flushed; while streaming, it waits every interval and writes
// what next makes of the previous report, until the client goes (nil) or
// next fails (its error, for the caller to log: the answer has begun).
// Both front doors' stats routes stream this way.
func StreamReports[T any](w http.ResponseWriter, ctx context.Context, report T, streaming bool, every time.Duration, next func(prev T) (T, error), line func(T) any) error {
	enc, rc := BeginJSONLines(w)
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	var buf []byte
	for {
		var err error
		v := line(report)
		if a, ok := v.(JSONAppender); ok {
			buf = append(a.AppendJSON(buf[:0]), '\n')
			_, err = w.Write(buf)
		} else {
			err = enc.Encode(v)
		}
		if err != nil {
			return nil
		}
		_ = rc.Flush()
		if !streaming {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		if report, err = next(report); err != nil {
			return err
		}
	}
}
