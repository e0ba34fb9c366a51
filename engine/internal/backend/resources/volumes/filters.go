package volumes

import (
	"context"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/platform/listfilter"
	"github.com/berth-project/berth/engine/internal/core"
)

// compile turns filters into one test with the list filters' rules
// (listfilter); only the keys in allowed are accepted.
func (s *Store) compile(filters map[string][]string, allowed ...string) (listfilter.Test[*core.Volume], error) {
	all := map[string]listfilter.Rule[*core.Volume]{
		"name":   listfilter.Pattern(func(v *core.Volume) string { return v.Name }),
		"driver": listfilter.Equal(func(v *core.Volume) string { return v.Driver }),
		"scope":  listfilter.Equal(func(v *core.Volume) string { return v.Scope }),
		"label":  listfilter.Labels(func(v *core.Volume) map[string]string { return v.Labels }),
		"label!": listfilter.Labels(func(v *core.Volume) map[string]string { return v.Labels }),
		"until":  listfilter.CreatedBefore(func(v *core.Volume) time.Time { return v.CreatedAt }),
		"anonymous": func(key string, vals []string) (listfilter.Test[*core.Volume], error) {
			wants, err := listfilter.Bools(key, vals)
			if err != nil {
				return nil, err
			}
			return listfilter.Pure(func(v *core.Volume) bool { return wants[v.Anonymous] }), nil
		},
		"dangling": func(key string, vals []string) (listfilter.Test[*core.Volume], error) {
			wants, err := listfilter.Bools(key, vals)
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context, v *core.Volume) (bool, error) {
				ids, err := s.usersOf(ctx, v.Name)
				if err != nil {
					return false, err
				}
				return wants[len(ids) == 0], nil
			}, nil
		},
	}
	return listfilter.Compile("volume", filters, listfilter.Only(all, allowed...))
}
