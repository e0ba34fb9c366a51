package dockerapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/berth-project/berth/engine/internal/core"
	"github.com/berth-project/berth/engine/internal/httpwire"
)

// maxBodyBytes bounds the JSON bodies Docker's routes decode.
const maxBodyBytes = 4 << 20

// errorBody is Docker's error answer.
type errorBody struct {
	Message string `json:"message"`
}

// writeMessage answers status with Docker's {"message": ...} body.
func writeMessage(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorBody{Message: msg})
}

// writeError answers err with its Docker status; 304 has no body. A
// lookup that found nothing is worded as Docker words it ("No such
// container: X"), which Docker's clients print and match on.
func writeError(w http.ResponseWriter, err error) {
	status := httpwire.StatusOf(err)
	if status == http.StatusNotModified {
		w.WriteHeader(status)
		return
	}
	writeMessage(w, status, dockerMessage(err))
}

// dockerMessage is err's text in Docker's words.
func dockerMessage(err error) string {
	var missing *core.NotFoundError
	if !errors.As(err, &missing) {
		return err.Error()
	}
	switch missing.Kind {
	case core.ErrNoSuchContainer:
		return "No such container: " + missing.Name
	case core.ErrNoSuchImage:
		return "No such image: " + missingImageName(missing.Name)
	case core.ErrNoSuchVolume:
		return "get " + missing.Name + ": no such volume"
	case core.ErrNoSuchNetwork:
		return "network " + missing.Name + " not found"
	}
	return err.Error()
}

// writeJSON answers status with body as JSON.
func writeJSON(w http.ResponseWriter, status int, body any) {
	if err := httpwire.WriteJSON(w, status, body); err != nil {
		writeMessage(w, http.StatusInternalServerError, "encoding response failed")
	}
}

// finishStatus answers err, or status with no body when there is none.
func finishStatus(w http.ResponseWriter, status int, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(status)
}

// decodeBody decodes a JSON body into dst; an empty body leaves dst as is.
func decodeBody(r *http.Request, dst any) error {
	body := io.LimitReader(r.Body, maxBodyBytes+1)
	data, err := io.ReadAll(body)
	if err != nil {
		return core.InvalidArgument("body", err)
	}
	if len(data) > maxBodyBytes {
		return fmt.Errorf("request body over %d bytes: %w", maxBodyBytes, core.ErrTooLarge)
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, dst); err != nil {
		return core.InvalidArgument("body", err)
	}
	return nil
}

// pathParam is a path parameter, unescaped.
func pathParam(r *http.Request, key string) string {
	raw := chi.URLParam(r, key)
	if v, err := url.PathUnescape(raw); err == nil {
		return v
	}
	return raw
}

// query reads Docker's query parameters; the first malformed one is kept
// in err and named in the 400 answer.
type query struct {
	v   url.Values
	err error
}

func queryOf(r *http.Request) *query { return &query{v: r.URL.Query()} }

func (q *query) has(name string) bool { _, ok := q.v[name]; return ok }

func (q *query) str(name string) string { return q.v.Get(name) }

// boolean reads Docker's booleans: "", "0", "false" and "no" are false
// ("1", "true" ... are true), as the daemon reads them.
func (q *query) boolean(name string, def bool) bool {
	if !q.has(name) {
		return def
	}
	switch strings.ToLower(strings.TrimSpace(q.v.Get(name))) {
	case "", "0", "false", "no", "off":
		return false
	}
	return true
}

func (q *query) integer(name string, def int64) int64 {
	if !q.has(name) || q.v.Get(name) == "" {
		return def
	}
	n, err := strconv.ParseInt(q.v.Get(name), 10, 64)
	if err != nil && q.err == nil {
		q.err = core.InvalidArgument(name, fmt.Errorf("%q is not an integer", q.v.Get(name)))
	}
	return n
}

// filtersOf decodes the filters parameter of a request that takes no other;
// a malformed one is answered 400 here, and ok is false.
func filtersOf(w http.ResponseWriter, r *http.Request) (filters map[string][]string, ok bool) {
	q := queryOf(r)
	f := q.filters()
	if q.err != nil {
		writeError(w, q.err)
		return nil, false
	}
	return f, true
}

// filters decodes Docker's filters parameter: {"key":{"value":true}} or
// the older {"key":["value"]}.
func (q *query) filters() map[string][]string {
	raw := q.v.Get("filters")
	if raw == "" {
		return nil
	}
	out := map[string][]string{}
	var modern map[string]map[string]bool
	if err := json.Unmarshal([]byte(raw), &modern); err == nil {
		for k, set := range modern {
			for v, on := range set {
				if on {
					out[k] = append(out[k], v)
				}
			}
		}
		return out
	}
	var legacy map[string][]string
	if err := json.Unmarshal([]byte(raw), &legacy); err != nil {
		if q.err == nil {
			q.err = core.InvalidArgument("filters", err)
		}
		return nil
	}
	return legacy
}

// noRoute answers unknown paths as Docker does.
func noRoute(w http.ResponseWriter, r *http.Request) {
	writeMessage(w, http.StatusNotFound, "page not found")
}

// methodNotAllowed answers a known path with another method.
func methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	writeMessage(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s", r.Method, r.URL.Path))
}

// writeJSONLine writes one JSON document to an answer already started.
func writeJSONLine(w http.ResponseWriter, body any) {
	_ = json.NewEncoder(w).Encode(body)
}
