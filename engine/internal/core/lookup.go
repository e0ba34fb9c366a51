package core

import (
	"fmt"
	"iter"
	"strings"
)

// ByIDPrefix is the rule by which a unique ID prefix names an object (the
// stores try the full name and ID first): among the objects seq yields
// with their IDs, the one whose ID begins with prefix; found is false when
// none does, and more than one is ErrAmbiguous. A full ID is a prefix of
// itself only.
func ByIDPrefix[T any](seq iter.Seq2[string, T], prefix string) (obj T, found bool, err error) {
	for id, o := range seq {
		if !strings.HasPrefix(id, prefix) {
			continue
		}
		if found {
			var zero T
			return zero, false, fmt.Errorf("%q: %w", prefix, ErrAmbiguous)
		}
		obj, found = o, true
	}
	return obj, found, nil
}
