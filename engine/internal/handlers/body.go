package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/berth-project/berth/engine/internal/backend/platform/sizelimit"
	"github.com/berth-project/berth/engine/internal/core"
)

// maxJSONBody bounds every JSON request body; a container creation request,
// the largest any client sends, stays far below it.
const maxJSONBody = 4 << 20

// errBodyTooLarge is a JSON body past maxJSONBody: a 413.
var errBodyTooLarge = fmt.Errorf("the request body is larger than %s: %w", sizelimit.FormatSize(maxJSONBody), core.ErrTooLarge)

// decodeJSONBody decodes r's JSON body into dst (see decodeJSON); an empty
// body keeps dst's defaults.
func decodeJSONBody(r *http.Request, dst any) error {
	_, err := decodeJSON(r.Body, dst, true)
	return err
}

// decodeJSON is the one decoder of JSON request bodies. It reads exactly
// one JSON value into dst: a body over maxJSONBody is a 413, anything but
// whitespace after the value a 400, and a value of the wrong type a 400 that
// names the member. An empty body is a 400 unless emptyOK; present reports
// whether the body held a value.
func decodeJSON(body io.Reader, dst any, emptyOK bool) (present bool, err error) {
	dec := json.NewDecoder(&boundedBody{r: body, left: maxJSONBody})
	if err := dec.Decode(dst); err != nil {
		if errors.Is(err, io.EOF) && emptyOK {
			return false, nil
		}
		return false, bodyError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err == nil || !errors.Is(err, errBodyTooLarge) {
			err = errors.New("unexpected data after the JSON value")
		}
		return true, bodyError(err)
	}
	return true, nil
}

// bodyError classifies a decoding failure: the member a type error is about,
// or the body as a whole.
func bodyError(err error) error {
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.Is(err, errBodyTooLarge):
		return core.InvalidArgument("body", err)
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return core.InvalidArgument(typeErr.Field, fmt.Errorf("expected %s, got JSON %s", typeErr.Type, typeErr.Value))
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return core.InvalidArgument("body", fmt.Errorf("not a complete JSON value: %w", err))
	default:
		return core.InvalidArgument("body", fmt.Errorf("not valid JSON: %w", err))
	}
}

// boundedBody reads at most left bytes and fails with errBodyTooLarge on
// the first byte past them.
type boundedBody struct {
	r    io.Reader
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errBodyTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return 0, errBodyTooLarge
	}
	return n, err
}

// unsupportedMembers are members of Podman's requests that decodeStrict's
// targets lack on purpose, with the reason the 400 gives.
var unsupportedMembers = map[string]string{
	// Podman 5 and 6's network create --route.
	"routes": "static routes are not supported: the network backend (netavark 1.4) sets none up",
	// Podman 5's update --blkio-weight-device (a create refuses it too).
	"BlkIOWeightDevice": "per-device block IO weights are not supported",
}

// decodeStrict decodes a JSON body (through the one body decoder: bounds,
// trailing data, type errors) into dst, refusing members dst does not have
// (each is named in the 400); an empty body keeps dst as is.
func decodeStrict(r *http.Request, dst any) error {
	var raw json.RawMessage
	if present, err := decodeJSON(r.Body, &raw, true); err != nil || !present {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			field = strings.Trim(field, `"`)
			if why, known := unsupportedMembers[field]; known {
				return core.InvalidArgument(field, errors.New(why))
			}
			return core.InvalidArgument(field, errors.New("not a member of this request"))
		}
		return bodyError(err)
	}
	return nil
}
