// Package listfilter holds the value rules every list filter shares (labels,
// until), so that containers, pods, volumes, networks and secrets read them
// the same way Podman does.
package listfilter

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// HasLabel reports whether labels hold "key" (any value) or "key=value".
func HasLabel(labels map[string]string, filter string) bool {
	key, value, withValue := strings.Cut(filter, "=")
	got, ok := labels[key]
	return ok && (!withValue || got == value)
}

// Until reads a time as Podman's until filter does: a duration before now,
// Unix seconds (with a fraction or not), or RFC 3339 with or without zone or
// a date alone (zoneless forms in local time).
func Until(value string) (time.Time, error) {
	if d, err := time.ParseDuration(value); err == nil {
		return time.Now().Add(-d), nil
	}
	if secs, err := strconv.ParseFloat(value, 64); err == nil {
		return time.Unix(0, int64(secs*float64(time.Second))), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, value, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("until=%q is not a time, Unix timestamp or duration", value)
}
