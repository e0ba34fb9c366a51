package events

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrBadFilter is wrapped by ParseFilter for an unknown key or bad value.
var ErrBadFilter = errors.New("invalid event filter")

// Filter selects events: values of one key are ORed, keys are ANDed, as
// Podman does. The zero Filter matches everything.
type Filter struct {
	keys map[string][]string
}

// filterKeys are the keys Podman's event filters accept (case-insensitive);
// "status" is a synonym of "event".
var filterKeys = map[string]string{
	"container": "container",
	"event":     "event",
	"status":    "event",
	"image":     "image",
	"pod":       "pod",
	"volume":    "volume",
	"network":   "network",
	"secret":    "secret",
	"type":      "type",
	"label":     "label",
}

// ParseFilter validates Podman's filters parameter (already decoded from
// its JSON object form).
func ParseFilter(raw map[string][]string) (Filter, error) {
	f := Filter{keys: map[string][]string{}}
	for key, values := range raw {
		canon, ok := filterKeys[strings.ToLower(key)]
		if !ok {
			return Filter{}, fmt.Errorf("%w: %q is not a supported filter", ErrBadFilter, key)
		}
		for _, v := range values {
			if canon == "label" && v == "" {
				return Filter{}, fmt.Errorf("%w: empty label filter", ErrBadFilter)
			}
			f.keys[canon] = append(f.keys[canon], v)
		}
	}
	return f, nil
}

// ParseFilterStrings parses "key=value" filters (the CLI form).
func ParseFilterStrings(list []string) (Filter, error) {
	raw := map[string][]string{}
	for _, s := range list {
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return Filter{}, fmt.Errorf("%w: %q is not key=value", ErrBadFilter, s)
		}
		raw[k] = append(raw[k], v)
	}
	return ParseFilter(raw)
}

// Match reports whether e passes the filter.
func (f Filter) Match(e Event) bool {
	for key, values := range f.keys {
		ok := false
		for _, v := range values {
			if matchOne(key, v, e) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func matchOne(key, value string, e Event) bool {
	byNameOrID := func(typ string) bool {
		return e.Type == typ && value != "" && (e.Name == value || strings.HasPrefix(e.ID, value))
	}
	switch key {
	case "container":
		return byNameOrID(TypeContainer)
	case "image":
		return byNameOrID(TypeImage)
	case "pod":
		return byNameOrID(TypePod)
	case "volume":
		return e.Type == TypeVolume && value != "" && strings.HasPrefix(e.ID, value)
	case "network":
		return byNameOrID(TypeNetwork)
	case "secret":
		return byNameOrID(TypeSecret)
	case "event":
		return e.Status == value
	case "type":
		return e.Type == value
	case "label":
		k, v, hasValue := strings.Cut(value, "=")
		got, ok := e.Attributes[k]
		if !hasValue {
			return ok
		}
		return ok && got == v
	}
	return false
}

// v4Types and v4Statuses are the event types and statuses Podman 4 clients
// know (4.3.1's to 4.9's lists are the same): they crash on any other, so
// streams to them leave such events out. "update" came with Podman 5, and
// podman 4.3.1's events crashed on the one its own update made.
var (
	v4Types    = []string{TypeContainer, TypeImage, TypePod, TypeVolume, TypeNetwork, TypeSystem, "machine"}
	v4Statuses = []string{
		"attach", "auto-update", "build", "checkpoint", "cleanup", "commit", "create", "exec",
		"exec_died", "died", "export", "health_status", "history", "import", "init", "kill",
		"loadfromarchive", "mount", "connect", "disconnect", "pause", "prune", "pull", "push",
		"refresh", "remove", "rename", "renumber", "restart", "restore", "save", "start", "stop",
		"sync", "tag", "unmount", "unpause", "untag",
	}
)

// DecodableByV4 reports whether a Podman 4 client can decode e.
func DecodableByV4(e Event) bool {
	return slices.Contains(v4Types, e.Type) && slices.Contains(v4Statuses, e.Status)
}
