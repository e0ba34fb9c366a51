// Package rlimit holds the resource-limit wire type of the engine API.
//
// Podman's clients send rlimits as {"type":"nofile","hard":-1,"soft":-1}, where a
// negative number means "unlimited", while its own server decodes the limits as
// uint64 and rejects -1. Berth accepts both spellings: any negative integer is
// read as Unlimited (the maximum uint64, RLIM_INFINITY on Linux) and any
// non-negative integer up to the maximum uint64 is taken as is.
package rlimit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Unlimited is the value of a limit that is not limited (RLIM_INFINITY).
const Unlimited uint64 = math.MaxUint64

// ErrInvalid is wrapped by every error Rlimit.UnmarshalJSON returns for a
// malformed document, so handlers can answer 400 with errors.Is.
var ErrInvalid = errors.New("invalid rlimit")

// Rlimit is one POSIX resource limit as it travels in the engine API.
// Type is the limit's name as clients send it ("nofile", "RLIMIT_NOFILE", ...);
// this package does not interpret it.
type Rlimit struct {
	Type string `json:"type"`
	Hard uint64 `json:"hard"`
	Soft uint64 `json:"soft"`
}

// wireRlimit is the loosely typed shape UnmarshalJSON decodes first, so that
// each limit can be checked with a precise message.
type wireRlimit struct {
	Type *string         `json:"type"`
	Hard json.RawMessage `json:"hard"`
	Soft json.RawMessage `json:"soft"`
}

// UnmarshalJSON decodes a JSON object with the members type (string), hard and
// soft (integers; negative means Unlimited). Missing members and null leave the
// field at its zero value, as encoding/json does; floats, strings, booleans,
// objects and numbers above the maximum uint64 are errors wrapping ErrInvalid.
// A JSON null for the whole value leaves r unchanged.
func (r *Rlimit) UnmarshalJSON(data []byte) error {
	trimmed := bytes.TrimSpace(data)
	if bytes.Equal(trimmed, []byte("null")) {
		return nil
	}
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return fmt.Errorf("%w: expected a JSON object, got %s", ErrInvalid, describe(trimmed))
	}
	var wire wireRlimit
	if err := json.Unmarshal(trimmed, &wire); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field == "type" {
			return fmt.Errorf("%w: \"type\" must be a string, got %s", ErrInvalid, typeErr.Value)
		}
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	hard, err := parseLimit("hard", wire.Hard)
	if err != nil {
		return err
	}
	soft, err := parseLimit("soft", wire.Soft)
	if err != nil {
		return err
	}
	decoded := Rlimit{Hard: hard, Soft: soft}
	if wire.Type != nil {
		decoded.Type = *wire.Type
	}
	*r = decoded
	return nil
}

// MarshalJSON encodes r with the limits as plain unsigned integers, so Unlimited
// is written as 18446744073709551615. That is the spelling every decoder of
// the libpod API accepts, Podman's own server included (it rejects -1).
func (r Rlimit) MarshalJSON() ([]byte, error) {
	typeJSON, err := json.Marshal(r.Type)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(typeJSON)+64)
	out = append(out, `{"type":`...)
	out = append(out, typeJSON...)
	out = append(out, `,"hard":`...)
	out = strconv.AppendUint(out, r.Hard, 10)
	out = append(out, `,"soft":`...)
	out = strconv.AppendUint(out, r.Soft, 10)
	out = append(out, '}')
	return out, nil
}

// parseLimit reads one limit from its raw JSON text.
func parseLimit(field string, raw json.RawMessage) (uint64, error) {
	text := bytes.TrimSpace(raw)
	if len(text) == 0 || bytes.Equal(text, []byte("null")) {
		return 0, nil
	}
	if !isJSONInteger(text) {
		return 0, fmt.Errorf("%w: %q must be an integer, got %s", ErrInvalid, field, describe(text))
	}
	if text[0] == '-' {
		if allZero(text[1:]) {
			return 0, nil
		}
		return Unlimited, nil
	}
	value, err := strconv.ParseUint(string(text), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %q value %s is larger than the maximum %d", ErrInvalid, field, text, Unlimited)
	}
	return value, nil
}

// isJSONInteger reports whether text is a JSON number without fraction or
// exponent: an optional minus sign followed by digits, no leading zeros.
func isJSONInteger(text []byte) bool {
	digits := text
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || (digits[0] == '0' && len(digits) > 1) {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// allZero reports whether digits consists of zeros only ("-0" is zero, not negative).
func allZero(digits []byte) bool {
	for _, c := range digits {
		if c != '0' {
			return false
		}
	}
	return true
}

// describe names the kind of a JSON value for error messages, quoting short values.
func describe(value []byte) string {
	const maxShown = 40
	kind := "a value"
	switch {
	case len(value) == 0:
		return "nothing"
	case value[0] == '"':
		kind = "a string"
	case value[0] == '{':
		kind = "an object"
	case value[0] == '[':
		kind = "an array"
	case bytes.Equal(value, []byte("true")) || bytes.Equal(value, []byte("false")):
		kind = "a boolean"
	case value[0] == '-' || (value[0] >= '0' && value[0] <= '9'):
		kind = "a non-integer number"
	}
	if len(value) > maxShown {
		return kind
	}
	return kind + " " + string(value)
}
