package secrets

import (
	"github.com/berth-project/berth/engine/internal/backend/platform/listfilter"
	"github.com/berth-project/berth/engine/internal/core"
)

// compileFilters turns list filters into one test with the list filters'
// rules (listfilter): name and id are patterns, label and label! labels.
func compileFilters(filters map[string][]string) (listfilter.Test[*core.Secret], error) {
	labels := listfilter.Labels(func(s *core.Secret) map[string]string { return s.Spec.Labels })
	return listfilter.Compile("secret", filters, map[string]listfilter.Rule[*core.Secret]{
		"name":   listfilter.Pattern(func(s *core.Secret) string { return s.Spec.Name }),
		"id":     listfilter.Pattern(func(s *core.Secret) string { return s.ID }),
		"label":  labels,
		"label!": labels,
	})
}
