package pods

import (
	"slices"
	"strings"
	"time"

	"github.com/berth-project/berth/engine/internal/backend/platform/listfilter"
	"github.com/berth-project/berth/engine/internal/core"
)

// podView is what the pod filters look at: the pod, its members and the
// status derived from them.
type podView struct {
	pod    *core.Pod
	ctrs   []core.PodMember
	status string
}

// compileFilters turns the listing's filters into one test with the list
// filters' rules (listfilter). Names, IDs and member names and IDs are
// patterns, as Podman reads them.
func compileFilters(filters map[string][]string) (listfilter.Test[podView], error) {
	labels := listfilter.Labels(func(v podView) map[string]string { return v.pod.Spec.Labels })
	return listfilter.Compile("pod", filters, map[string]listfilter.Rule[podView]{
		"id":        listfilter.Pattern(func(v podView) string { return v.pod.ID }),
		"name":      listfilter.Pattern(func(v podView) string { return v.pod.Name }),
		"ctr-names": anyMember(func(c core.PodMember) string { return c.Name }),
		"ctr-ids":   anyMember(func(c core.PodMember) string { return c.ID }),
		"label":     labels,
		"label!":    labels,
		"until":     listfilter.CreatedBefore(func(v podView) time.Time { return v.pod.Created }),
		"status": listfilter.Func(func(key string, vals []string) (func(podView) bool, error) {
			if err := listfilter.OneOf(key, vals, "created", "running", "stopped", "paused", "exited", "dead", "degraded", "error"); err != nil {
				return nil, err
			}
			return func(v podView) bool {
				return slices.ContainsFunc(vals, func(s string) bool { return strings.EqualFold(v.status, s) })
			}, nil
		}),
		"ctr-status": listfilter.Func(func(key string, vals []string) (func(podView) bool, error) {
			if err := listfilter.OneOf(key, vals, "created", "running", "paused", "stopped", "exited", "unknown", "initialized", "configured", "removing"); err != nil {
				return nil, err
			}
			return func(v podView) bool {
				return slices.ContainsFunc(v.ctrs, func(c core.PodMember) bool {
					return slices.Contains(vals, c.State.String()) || slices.Contains(vals, string(c.State))
				})
			}, nil
		}),
		"ctr-number": listfilter.Func(func(key string, vals []string) (func(podView) bool, error) {
			nums, err := listfilter.Ints(key, vals, 0)
			if err != nil {
				return nil, err
			}
			return func(v podView) bool { return slices.Contains(nums, len(v.ctrs)) }, nil
		}),
		"network": listfilter.Func(func(_ string, vals []string) (func(podView) bool, error) {
			return func(v podView) bool {
				return slices.ContainsFunc(networksOf(v.ctrs), func(n string) bool { return slices.Contains(vals, n) })
			}, nil
		}),
	})
}

// anyMember is the rule of a member field read as patterns: some member
// matches.
func anyMember(field func(core.PodMember) string) listfilter.Rule[podView] {
	return listfilter.Func(func(key string, vals []string) (func(podView) bool, error) {
		match, err := listfilter.Patterns(key, vals)
		if err != nil {
			return nil, err
		}
		return func(v podView) bool {
			return slices.ContainsFunc(v.ctrs, func(c core.PodMember) bool { return match(field(c)) })
		}, nil
	})
}
