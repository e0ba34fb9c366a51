package apierror

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
)

// ProblemContentType is the media type of an RFC 7807 problem document.
const ProblemContentType = "application/problem+json"

// Problem is an RFC 7807 problem document. Extra holds the problem-specific
// members (for example "uuid" or "path"); they are written at the top level
// beside the standard members, which they can never replace.
type Problem struct {
	Type   string
	Title  string
	Status int
	Detail string
	Extra  map[string]any
}

// reservedMembers are the standard members that Extra cannot override.
var reservedMembers = map[string]bool{"type": true, "title": true, "status": true, "detail": true}

// Error returns the detail, or the title when there is none, so a Problem can
// travel as an error value.
func (p Problem) Error() string {
	if p.Detail != "" {
		return p.Detail
	}
	if p.Title != "" {
		return p.Title
	}
	return http.StatusText(p.Status)
}

// withDefaults fills what RFC 7807 lets a producer leave out: type defaults to
// "about:blank", status to 500, title to the status text. A status outside
// 200-599 is replaced by 500: net/http panics on invalid codes, and a 1xx
// response cannot carry the document.
func (p Problem) withDefaults() Problem {
	p.Status = validStatus(p.Status)
	if p.Type == "" {
		p.Type = "about:blank"
	}
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	return p
}

// MarshalJSON writes the document flat: type, title, status and detail first,
// then the Extra members in key order. Extra members named like a standard
// member are dropped.
func (p Problem) MarshalJSON() ([]byte, error) {
	p = p.withDefaults()
	var buf bytes.Buffer
	buf.WriteByte('{')
	standard := []struct {
		key   string
		value any
	}{{"type", p.Type}, {"title", p.Title}, {"status", p.Status}, {"detail", p.Detail}}
	for i, member := range standard {
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := writeMember(&buf, member.key, member.value); err != nil {
			return nil, err
		}
	}
	keys := make([]string, 0, len(p.Extra))
	for key := range p.Extra {
		if !reservedMembers[key] {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	for _, key := range keys {
		buf.WriteByte(',')
		if err := writeMember(&buf, key, p.Extra[key]); err != nil {
			return nil, fmt.Errorf("problem member %q: %w", key, err)
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// writeMember appends "key":value.
func writeMember(buf *bytes.Buffer, key string, value any) error {
	encodedKey, err := json.Marshal(key)
	if err != nil {
		return err
	}
	encodedValue, err := json.Marshal(value)
	if err != nil {
		return err
	}
	buf.Write(encodedKey)
	buf.WriteByte(':')
	buf.Write(encodedValue)
	return nil
}

// UnmarshalJSON reads a flat problem document; members other than the four
// standard ones land in Extra. Standard members of the wrong JSON type are an
// error.
func (p *Problem) UnmarshalJSON(data []byte) error {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil {
		return err
	}
	var decoded Problem
	targets := map[string]any{"type": &decoded.Type, "title": &decoded.Title, "status": &decoded.Status, "detail": &decoded.Detail}
	for key, raw := range members {
		if target, ok := targets[key]; ok {
			if err := json.Unmarshal(raw, target); err != nil {
				return fmt.Errorf("problem member %q: %w", key, err)
			}
			continue
		}
		var value any
		if err := json.Unmarshal(raw, &value); err != nil {
			return fmt.Errorf("problem member %q: %w", key, err)
		}
		if decoded.Extra == nil {
			decoded.Extra = make(map[string]any)
		}
		decoded.Extra[key] = value
	}
	*p = decoded
	return nil
}

// WriteProblem answers with p.Status (500 when unset) and p as an
// application/problem+json body. Should an Extra member fail to encode, the
// document is sent without the Extra members rather than not at all.
func WriteProblem(w http.ResponseWriter, p Problem) {
	p = p.withDefaults()
	body, err := p.MarshalJSON()
	if err != nil {
		p.Extra = nil
		body, _ = p.MarshalJSON()
	}
	header := w.Header()
	header.Set("Content-Type", ProblemContentType)
	header.Set("X-Content-Type-Options", "nosniff")
	header.Del("Content-Length")
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}
