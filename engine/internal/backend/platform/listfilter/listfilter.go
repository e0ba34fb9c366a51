// Package listfilter compiles the filters of every listing (containers, pods,
// volumes, networks, secrets) with one set of rules, so that they all read
// names, labels, times and booleans the same way Podman does.
//
// A listing's filters arrive as key -> values. Values of one key are
// alternatives (any may match) unless the key's rule says otherwise (label and
// label!: every value must hold); different keys must all match. A key
// without a rule, or a value its rule refuses, is an invalid "filters"
// argument naming the key and the value.
package listfilter

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-project/berth/engine/internal/core"
)

// Test reports whether obj passes a filter. Most tests are pure; those that
// look something up (which containers use a volume) may fail, and an error
// stops the listing.
type Test[T any] func(ctx context.Context, obj T) (bool, error)

// Keep returns the objects that pass the test, in their order; the first
// error of a test stops it.
func (t Test[T]) Keep(ctx context.Context, objs []T) ([]T, error) {
	out := make([]T, 0, len(objs))
	for _, obj := range objs {
		ok, err := t(ctx, obj)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, obj)
		}
	}
	return out, nil
}

// Rule compiles the values of one filter key into its test; an error says
// which value is refused and why.
type Rule[T any] func(key string, vals []string) (Test[T], error)

// Compile builds the test of a listing of kind (as named in errors: "network",
// "volume" ...) from its filters and the rules of the keys it accepts.
func Compile[T any](kind string, filters map[string][]string, rules map[string]Rule[T]) (Test[T], error) {
	var tests []Test[T]
	for _, key := range slices.Sorted(maps.Keys(filters)) {
		rule, ok := rules[key]
		if !ok {
			return nil, core.InvalidArgument("filters", fmt.Errorf("%q is not a %s filter (%s)",
				key, kind, strings.Join(slices.Sorted(maps.Keys(rules)), ", ")))
		}
		vals := filters[key]
		if len(vals) == 0 {
			continue
		}
		test, err := rule(key, vals)
		if err != nil {
			return nil, core.InvalidArgument("filters", err)
		}
		tests = append(tests, test)
	}
	return func(ctx context.Context, obj T) (bool, error) {
		for _, test := range tests {
			if ok, err := test(ctx, obj); err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	}, nil
}

// Only keeps the rules of the keys in allowed: a listing and a prune of the
// same kind share rules but not keys.
func Only[T any](rules map[string]Rule[T], allowed ...string) map[string]Rule[T] {
	out := make(map[string]Rule[T], len(allowed))
	for _, key := range allowed {
		out[key] = rules[key]
	}
	return out
}

// Pure turns a predicate into a Test that cannot fail.
func Pure[T any](pred func(T) bool) Test[T] {
	return func(_ context.Context, obj T) (bool, error) { return pred(obj), nil }
}

// Func makes a Rule of a function that builds a pure predicate.
func Func[T any](build func(key string, vals []string) (func(T) bool, error)) Rule[T] {
	return func(key string, vals []string) (Test[T], error) {
		pred, err := build(key, vals)
		if err != nil {
			return nil, err
		}
		return Pure(pred), nil
	}
}

// Patterns compiles values that are unanchored regular expressions, as
// Podman reads names and IDs; a string equal to a value always matches (a
// name such as "a+b" is found by itself).
func Patterns(key string, vals []string) (func(string) bool, error) {
	res := make([]*regexp.Regexp, len(vals))
	for i, v := range vals {
		re, err := regexp.Compile(v)
		if err != nil {
			return nil, fmt.Errorf("%s=%q is not a regular expression: %w", key, v, err)
		}
		res[i] = re
	}
	return func(s string) bool {
		for i, re := range res {
			if s == vals[i] || re.MatchString(s) {
				return true
			}
		}
		return false
	}, nil
}

// Pattern is the rule of a name or ID field read with Patterns.
func Pattern[T any](field func(T) string) Rule[T] {
	return Func(func(key string, vals []string) (func(T) bool, error) {
		match, err := Patterns(key, vals)
		if err != nil {
			return nil, err
		}
		return func(obj T) bool { return match(field(obj)) }, nil
	})
}

// Prefix is the rule of an ID field matched by prefix.
func Prefix[T any](field func(T) string) Rule[T] {
	return Func(func(_ string, vals []string) (func(T) bool, error) {
		return func(obj T) bool {
			return slices.ContainsFunc(vals, func(v string) bool { return strings.HasPrefix(field(obj), v) })
		}, nil
	})
}

// Equal is the rule of a field that must equal one of the values; allowed,
// when given, is the closed set of values the key accepts.
func Equal[T any](field func(T) string, allowed ...string) Rule[T] {
	return Func(func(key string, vals []string) (func(T) bool, error) {
		if err := OneOf(key, vals, allowed...); err != nil {
			return nil, err
		}
		return func(obj T) bool { return slices.Contains(vals, field(obj)) }, nil
	})
}

// OneOf refuses a value outside allowed (no allowed values: any value).
func OneOf(key string, vals []string, allowed ...string) error {
	if len(allowed) == 0 {
		return nil
	}
	for _, v := range vals {
		if !slices.Contains(allowed, v) {
			return fmt.Errorf("%s=%q is not one of %s", key, v, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// Labels is the rule of the label and label! keys: every value, "key" or
// "key=value", must hold (label) or must not hold (label!).
func Labels[T any](field func(T) map[string]string) Rule[T] {
	return Func(func(key string, vals []string) (func(T) bool, error) {
		for _, v := range vals {
			if k, _, _ := strings.Cut(v, "="); k == "" {
				return nil, fmt.Errorf("%s=%q needs a key or key=value", key, v)
			}
		}
		want := key != "label!"
		return func(obj T) bool {
			labels := field(obj)
			for _, v := range vals {
				if HasLabel(labels, v) != want {
					return false
				}
			}
			return true
		}, nil
	})
}

// HasLabel reports whether labels hold "key" (any value) or "key=value".
func HasLabel(labels map[string]string, filter string) bool {
	key, value, withValue := strings.Cut(filter, "=")
	got, ok := labels[key]
	return ok && (!withValue || got == value)
}

// CreatedBefore is the rule of the until key: the object was created before
// one of the times (read with ParseUntil).
func CreatedBefore[T any](created func(T) time.Time) Rule[T] {
	return Func(func(_ string, vals []string) (func(T) bool, error) {
		var limit time.Time
		for _, v := range vals {
			t, err := ParseUntil(v)
			if err != nil {
				return nil, err
			}
			if t.After(limit) {
				limit = t
			}
		}
		return func(obj T) bool { return created(obj).Before(limit) }, nil
	})
}

// ParseUntil reads a time as Podman's until filter does: a duration before
// now, Unix seconds (with a fraction or not), or RFC 3339 with or without
// zone or a date alone (zoneless forms in local time).
func ParseUntil(value string) (time.Time, error) {
	if d, err := time.ParseDuration(value); err == nil {
		return time.Now().Add(-d), nil
	}
	if secs, err := strconv.ParseFloat(value, 64); err == nil {
		return time.Unix(0, int64(secs*float64(time.Second))), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, value, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("until=%q is not a time, Unix timestamp or duration", value)
}

// Bools reads a boolean key's values as the set of answers wanted: both true
// and false want every object.
func Bools(key string, vals []string) (map[bool]bool, error) {
	out := map[bool]bool{}
	for _, v := range vals {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%s=%q must be true or false", key, v)
		}
		out[b] = true
	}
	return out, nil
}

// Ints reads a key's values as integers of at least min.
func Ints(key string, vals []string, min int) ([]int, error) {
	out := make([]int, len(vals))
	for i, v := range vals {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("%s=%q is not an integer", key, v)
		}
		if n < min {
			return nil, fmt.Errorf("%s=%q is below %d", key, v, min)
		}
		out[i] = n
	}
	return out, nil
}
