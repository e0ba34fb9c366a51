package network

import (
	"context"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/platform/listfilter"
	"github.com/berth-project/berth/engine/internal/core"
)

// compile turns filters into one test with the list filters' rules
// (listfilter); only the keys in allowed are accepted.
func (m *Manager) compile(filters map[string][]string, allowed ...string) (listfilter.Test[*core.Network], error) {
	all := map[string]listfilter.Rule[*core.Network]{
		"name":     listfilter.Pattern(func(n *core.Network) string { return n.Name }),
		"id":       listfilter.Prefix(func(n *core.Network) string { return n.ID }),
		"driver":   listfilter.Equal(func(n *core.Network) string { return n.Driver }),
		"label":    listfilter.Labels(func(n *core.Network) map[string]string { return n.Labels }),
		"label!":   listfilter.Labels(func(n *core.Network) map[string]string { return n.Labels }),
		"until":    listfilter.CreatedBefore(func(n *core.Network) time.Time { return n.Created }),
		"dangling": m.dangling,
	}
	return listfilter.Compile("network", filters, listfilter.Only(all, allowed...))
}

// dangling is the rule of the dangling key: whether no container uses the
// network.
func (m *Manager) dangling(key string, vals []string) (listfilter.Test[*core.Network], error) {
	wants, err := listfilter.Bools(key, vals)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, n *core.Network) (bool, error) {
		u := m.usersOrNil()
		if u == nil {
			return wants[true], nil
		}
		ctrs, err := u.ContainersOnNetwork(ctx, n.Name)
		if err != nil {
			return false, err
		}
		return wants[len(ctrs) == 0], nil
	}, nil
}
