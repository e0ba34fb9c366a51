package volumes

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/listfilter"
	"github.com/berth-project/berth/engine/internal/core"
)

type matcher func(ctx context.Context, v *core.Volume) (bool, error)

// compile turns filters into one predicate, with Podman's rule: several
// values of one filter are alternatives (any may match), except label and
// label!, whose values must all hold; different filters must all match. A filter outside
// allowed, or a malformed value, is an invalid argument.
func (s *Store) compile(filters map[string][]string, allowed ...string) (matcher, error) {
	var preds []matcher
	for key, vals := range filters {
		if !slices.Contains(allowed, key) {
			return nil, core.InvalidArgument("filters", fmt.Errorf("%q is not a valid volume filter (%s)", key, strings.Join(allowed, ", ")))
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
			preds = append(preds, func(_ context.Context, v *core.Volume) (bool, error) {
				for i, val := range vals {
					if v.Name == val || (res[i] != nil && res[i].MatchString(v.Name)) {
						return true, nil
					}
				}
				return false, nil
			})
		case "driver":
			preds = append(preds, func(_ context.Context, v *core.Volume) (bool, error) {
				return slices.Contains(vals, v.Driver), nil
			})
		case "scope":
			preds = append(preds, func(_ context.Context, v *core.Volume) (bool, error) {
				return slices.Contains(vals, v.Scope), nil
			})
		case "label", "label!":
			want := key == "label"
			preds = append(preds, func(_ context.Context, v *core.Volume) (bool, error) {
				for _, val := range vals {
					if listfilter.HasLabel(v.Labels, val) != want {
						return false, nil
					}
				}
				return true, nil
			})
		case "dangling", "anonymous":
			wants, err := parseBools(key, vals)
			if err != nil {
				return nil, err
			}
			if key == "anonymous" {
				preds = append(preds, func(_ context.Context, v *core.Volume) (bool, error) {
					return wants[v.Anonymous], nil
				})
				continue
			}
			preds = append(preds, func(ctx context.Context, v *core.Volume) (bool, error) {
				ids, err := s.usersOf(ctx, v.Name)
				if err != nil {
					return false, err
				}
				return wants[len(ids) == 0], nil
			})
		case "until":
			// Alternatives: created before any of the times.
			var limit time.Time
			for _, val := range vals {
				t, err := listfilter.Until(val)
				if err != nil {
					return nil, core.InvalidArgument("filters", err)
				}
				if t.After(limit) {
					limit = t
				}
			}
			preds = append(preds, func(_ context.Context, v *core.Volume) (bool, error) {
				return v.CreatedAt.Before(limit), nil
			})
		}
	}
	return func(ctx context.Context, v *core.Volume) (bool, error) {
		for _, p := range preds {
			ok, err := p(ctx, v)
			if err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	}, nil
}

// parseBools reads a boolean filter's values: the set of values wanted
// (true and false both: every volume).
func parseBools(key string, vals []string) (map[bool]bool, error) {
	out := map[bool]bool{}
	for _, val := range vals {
		b, err := strconv.ParseBool(val)
		if err != nil {
			return nil, core.InvalidArgument("filters", fmt.Errorf("%s=%q must be true or false", key, val))
		}
		out[b] = true
	}
	return out, nil
}
