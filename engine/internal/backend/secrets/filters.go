package secrets

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/berth-project/berth/engine/internal/backend/listfilter"
	"github.com/berth-project/berth/engine/internal/core"
)

// compileFilters turns list filters into one predicate, with Podman's rule:
// several values of one filter are alternatives (any may match), except
// label and label!, whose values must all hold; different filters must all
// match. name and id values are unanchored regular expressions (an exact
// name always matches); an unknown filter or a bad value is an
// ErrInvalidArgument naming "filters".
func compileFilters(filters map[string][]string) (func(*core.Secret) bool, error) {
	var preds []func(*core.Secret) bool
	for _, key := range sortedKeys(filters) {
		vals := filters[key]
		if len(vals) == 0 {
			continue
		}
		switch key {
		case "name", "id":
			res := make([]*regexp.Regexp, len(vals))
			for i, v := range vals {
				re, err := regexp.Compile(v)
				if err != nil {
					return nil, core.InvalidArgument("filters", fmt.Errorf("%s=%q is not a regular expression", key, v))
				}
				res[i] = re
			}
			byID := key == "id"
			preds = append(preds, func(sec *core.Secret) bool {
				s := sec.Spec.Name
				if byID {
					s = sec.ID
				}
				for i, re := range res {
					if s == vals[i] || re.MatchString(s) {
						return true
					}
				}
				return false
			})
		case "label", "label!":
			for _, v := range vals {
				if v == "" {
					return nil, core.InvalidArgument("filters", errors.New(key+" needs a key or key=value"))
				}
			}
			want := key == "label"
			preds = append(preds, func(sec *core.Secret) bool {
				for _, v := range vals {
					if listfilter.HasLabel(sec.Spec.Labels, v) != want {
						return false
					}
				}
				return true
			})
		default:
			return nil, core.InvalidArgument("filters", fmt.Errorf("%q is not a valid secret filter (name, id, label, label!)", key))
		}
	}
	return func(sec *core.Secret) bool {
		for _, p := range preds {
			if !p(sec) {
				return false
			}
		}
		return true
	}, nil
}
