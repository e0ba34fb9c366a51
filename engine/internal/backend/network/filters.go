package network

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/berth-project/berth/engine/internal/core"
)

type matcher func(ctx context.Context, n *core.Network) (bool, error)

// compile turns filters into one predicate. Values of one filter are ORed,
// filters ANDed; every label and label! value must hold. A filter outside
// allowed, or a malformed value, is an invalid argument.
func (m *Manager) compile(filters map[string][]string, allowed ...string) (matcher, error) {
	var preds []matcher
	for key, vals := range filters {
		if !contains(allowed, key) {
			return nil, core.InvalidArgument("filters", fmt.Errorf("%q is not a valid network filter (%s)", key, strings.Join(allowed, ", ")))
		}
		if len(vals) == 0 {
			continue
		}
		switch key {
		case "name":
			res := make([]*regexp.Regexp, len(vals))
			for i, val := range vals {
				res[i], _ = regexp.Compile(val)
			}
			preds = append(preds, func(_ context.Context, n *core.Network) (bool, error) {
				for i, val := range vals {
					if n.Name == val || (res[i] != nil && res[i].MatchString(n.Name)) {
						return true, nil
					}
				}
				return false, nil
			})
		case "id":
			preds = append(preds, func(_ context.Context, n *core.Network) (bool, error) {
				for _, val := range vals {
					if strings.HasPrefix(n.ID, val) {
						return true, nil
					}
				}
				return false, nil
			})
		case "driver":
			preds = append(preds, func(_ context.Context, n *core.Network) (bool, error) {
				return contains(vals, n.Driver), nil
			})
		case "label", "label!":
			want := key == "label"
			preds = append(preds, func(_ context.Context, n *core.Network) (bool, error) {
				for _, val := range vals {
					if hasLabel(n.Labels, val) != want {
						return false, nil
					}
				}
				return true, nil
			})
		case "until":
			limit, err := parseUntil(vals[len(vals)-1])
			if err != nil {
				return nil, err
			}
			preds = append(preds, func(_ context.Context, n *core.Network) (bool, error) {
				return n.Created.Before(limit), nil
			})
		case "dangling":
			want, err := parseBools(key, vals)
			if err != nil {
				return nil, err
			}
			preds = append(preds, func(ctx context.Context, n *core.Network) (bool, error) {
				u := m.usersOrNil()
				if u == nil {
					return want, nil
				}
				ctrs, err := u.ContainersOnNetwork(ctx, n.Name)
				if err != nil {
					return false, err
				}
				return (len(ctrs) == 0) == want, nil
			})
		}
	}
	return func(ctx context.Context, n *core.Network) (bool, error) {
		for _, p := range preds {
			ok, err := p(ctx, n)
			if err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	}, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// hasLabel reports whether labels hold "key" (any value) or "key=value".
func hasLabel(labels map[string]string, f string) bool {
	k, val, withValue := strings.Cut(f, "=")
	got, ok := labels[k]
	return ok && (!withValue || got == val)
}

func parseBools(key string, vals []string) (bool, error) {
	var out bool
	for i, val := range vals {
		b, err := strconv.ParseBool(val)
		if err != nil {
			return false, core.InvalidArgument("filters", fmt.Errorf("%s=%q must be true or false", key, val))
		}
		if i > 0 && b != out {
			return false, core.InvalidArgument("filters", fmt.Errorf("%s has conflicting values", key))
		}
		out = b
	}
	return out, nil
}

// parseUntil reads a time as Podman's until filter does: RFC 3339 (with or
// without zone, date only), Unix seconds, or a duration before now.
func parseUntil(val string) (time.Time, error) {
	if d, err := time.ParseDuration(val); err == nil {
		return time.Now().Add(-d), nil
	}
	if secs, err := strconv.ParseFloat(val, 64); err == nil {
		return time.Unix(0, int64(secs*float64(time.Second))), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, val, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, core.InvalidArgument("filters", fmt.Errorf("until=%q is not a time, Unix timestamp or duration", val))
}
