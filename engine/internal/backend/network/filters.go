package network

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/berth-project/berth/engine/internal/backend/listfilter"
	"github.com/berth-project/berth/engine/internal/core"
)

type matcher func(ctx context.Context, n *core.Network) (bool, error)

// compile turns filters into one predicate. Values of one filter are ORed,
// filters ANDed; every label and label! value must hold. A filter outside
// allowed, or a malformed value, is an invalid argument.
func (m *Manager) compile(filters map[string][]string, allowed ...string) (matcher, error) {
	var preds []matcher
	for key, vals := range filters {
		if !slices.Contains(allowed, key) {
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
				return slices.Contains(vals, n.Driver), nil
			})
		case "label", "label!":
			want := key == "label"
			preds = append(preds, func(_ context.Context, n *core.Network) (bool, error) {
				for _, val := range vals {
					if listfilter.HasLabel(n.Labels, val) != want {
						return false, nil
					}
				}
				return true, nil
			})
		case "until":
			limit, err := listfilter.Until(vals[len(vals)-1])
			if err != nil {
				return nil, core.InvalidArgument("filters", err)
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
