package containers

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/platform/listfilter"
	"github.com/berth-project/berth/engine/internal/core"
)

// listFilters are the keys the container listing accepts.
var listFilters = []string{"id", "name", "label", "label!", "pod", "status", "exited", "ancestor", "before", "since", "until"}

// containerStates are the values of the status filter.
var containerStates = []string{"created", "running", "paused", "exited", "stopped", "configured", "removing", "stopping", "unknown", "restarting", "dead"}

// compileFilters turns list or prune filters into one test with the list
// filters' rules (listfilter); only the keys in allowed are accepted.
func (m *Manager) compileFilters(filters map[string][]string, allowed ...string) (listfilter.Test[*record], error) {
	labels := listfilter.Labels(func(r *record) map[string]string { return r.Spec.Labels })
	all := map[string]listfilter.Rule[*record]{
		"id":     listfilter.Pattern(func(r *record) string { return r.ID }),
		"name":   listfilter.Pattern(func(r *record) string { return r.Name }),
		"label":  labels,
		"label!": labels,
		"until":  listfilter.CreatedBefore(func(r *record) time.Time { return r.Created }),
		"pod": listfilter.Func(func(_ string, vals []string) (func(*record) bool, error) {
			pods := m.podResolver()
			return func(r *record) bool {
				return r.Pod != "" && slices.ContainsFunc(vals, func(v string) bool {
					return strings.HasPrefix(r.Pod, v) || (pods != nil && pods.PodName(r.Pod) == v)
				})
			}, nil
		}),
		"status": listfilter.Func(func(key string, vals []string) (func(*record) bool, error) {
			if err := listfilter.OneOf(key, vals, containerStates...); err != nil {
				return nil, err
			}
			return func(r *record) bool {
				return slices.Contains(vals, r.State.String()) || slices.Contains(vals, string(r.State))
			}, nil
		}),
		"exited": listfilter.Func(func(key string, vals []string) (func(*record) bool, error) {
			codes, err := listfilter.Ints(key, vals, math.MinInt32)
			if err != nil {
				return nil, err
			}
			return func(r *record) bool {
				return (r.State == core.StateExited || r.State == core.StateStopped) && slices.Contains(codes, int(r.ExitCode))
			}, nil
		}),
		"ancestor": listfilter.Func(func(_ string, vals []string) (func(*record) bool, error) {
			return func(r *record) bool {
				return slices.ContainsFunc(vals, func(v string) bool { return ancestorMatches(r, v) })
			}, nil
		}),
		"before": m.createdRelative,
		"since":  m.createdRelative,
	}
	return listfilter.Compile("container", filters, listfilter.Only(all, allowed...))
}

// createdRelative is the rule of before and since: created before (after)
// one of the containers named.
func (m *Manager) createdRelative(key string, vals []string) (listfilter.Test[*record], error) {
	refs := make([]time.Time, 0, len(vals))
	for _, v := range vals {
		e, err := m.lookup(v)
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %w", key, v, err)
		}
		refs = append(refs, m.snapshot(e).Created)
	}
	before := key == "before"
	return listfilter.Pure(func(r *record) bool {
		return slices.ContainsFunc(refs, func(t time.Time) bool {
			return before && r.Created.Before(t) || !before && r.Created.After(t)
		})
	}), nil
}
