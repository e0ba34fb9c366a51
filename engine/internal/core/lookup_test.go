package core

import (
	"errors"
	"maps"
	"testing"
)

func TestByIDPrefix(t *testing.T) {
	objs := map[string]string{"abc123": "first", "abd456": "second"}
	for _, tc := range []struct {
		prefix string
		want   string
		found  bool
		err    error
	}{
		{prefix: "abc", want: "first", found: true},
		{prefix: "abd456", want: "second", found: true},
		{prefix: "ab", err: ErrAmbiguous},
		{prefix: "x"},
	} {
		got, found, err := ByIDPrefix(maps.All(objs), tc.prefix)
		if got != tc.want || found != tc.found || !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
			t.Errorf("ByIDPrefix(%q) = %q, %v, %v; want %q, %v, %v", tc.prefix, got, found, err, tc.want, tc.found, tc.err)
		}
	}
}
