package imagestore

import (
	"errors"
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/containers/image/v5/docker/reference"

	"github.com/berth-project/berth/engine/internal/core"
)

// viewFilter decides whether an image passes one filter.
type viewFilter func(*imageView) bool

// compileFilters turns list filters into one predicate. Values of one filter
// are alternatives, except label and label!, whose values must all hold.
// An unknown filter or a malformed value is an ErrInvalidArgument.
func (s *Store) compileFilters(filters map[string][]string, snap *snapshot) (viewFilter, error) {
	var all []viewFilter
	for name, values := range filters {
		if len(values) == 0 {
			continue
		}
		var alternatives []viewFilter
		for _, value := range values {
			f, err := s.compileFilter(name, value, snap)
			if err != nil {
				return nil, core.InvalidArgument("filters", err)
			}
			alternatives = append(alternatives, f)
		}
		if name == "label" || name == "label!" {
			all = append(all, alternatives...)
			continue
		}
		all = append(all, func(v *imageView) bool {
			for _, f := range alternatives {
				if f(v) {
					return true
				}
			}
			return false
		})
	}
	return func(v *imageView) bool {
		for _, f := range all {
			if !f(v) {
				return false
			}
		}
		return true
	}, nil
}

// compileFilter compiles one name=value filter.
func (s *Store) compileFilter(name, value string, snap *snapshot) (viewFilter, error) {
	switch name {
	case "reference":
		if value == "" {
			return nil, errors.New("reference filter needs a value")
		}
		return func(v *imageView) bool { return referenceMatches(value, v) }, nil
	case "label":
		return labelFilter(value, true)
	case "label!":
		return labelFilter(value, false)
	case "dangling", "intermediate", "readonly", "containers":
		want, err := strconv.ParseBool(value)
		if err != nil {
			return nil, fmt.Errorf("%s filter: %q is not true or false", name, value)
		}
		return func(v *imageView) bool {
			switch name {
			case "dangling":
				return v.dangling == want
			case "intermediate":
				return v.intermediate == want
			case "readonly":
				return v.img.ReadOnly == want
			default:
				return (v.containers > 0) == want
			}
		}, nil
	case "id":
		if value == "" {
			return nil, errors.New("id filter needs a value")
		}
		id := strings.TrimPrefix(value, "sha256:")
		return func(v *imageView) bool { return strings.HasPrefix(v.img.ID, id) }, nil
	case "digest":
		return func(v *imageView) bool {
			for _, d := range v.img.Digests {
				if d.String() == value {
					return true
				}
			}
			return v.img.Digest.String() == value
		}, nil
	case "before", "since", "after":
		ref, err := s.find(value)
		if err != nil {
			if errors.Is(err, core.ErrNoSuchImage) {
				return nil, fmt.Errorf("%s filter: no image %q", name, value)
			}
			return nil, fmt.Errorf("%s filter: %w", name, err)
		}
		refView := snap.byID[ref.ID]
		if refView == nil {
			return nil, fmt.Errorf("%s filter: no image %q", name, value)
		}
		at := refView.entry.created
		if name == "before" {
			return func(v *imageView) bool { return v.entry.created.Before(at) }, nil
		}
		return func(v *imageView) bool { return v.entry.created.After(at) }, nil
	case "until":
		at, err := ParseTimestamp(value, time.Now())
		if err != nil {
			return nil, fmt.Errorf("until filter: %w", err)
		}
		return func(v *imageView) bool { return v.entry.created.Before(at) }, nil
	default:
		return nil, fmt.Errorf("unsupported image filter %q", name)
	}
}

// labelFilter matches "key" (present) or "key=value"; want=false negates (label!).
func labelFilter(value string, want bool) (viewFilter, error) {
	if value == "" {
		return nil, errors.New("label filter needs a key or key=value")
	}
	key, val, hasValue := strings.Cut(value, "=")
	return func(v *imageView) bool {
		got, ok := v.entry.labels[key]
		matched := ok && (!hasValue || got == val)
		return matched == want
	}, nil
}

// referenceMatches reports whether pattern matches one of the image's names.
// The pattern may use shell wildcards; it is compared with each full name,
// the name without its tag, and (for patterns without a registry) the name
// without its registry, the way users write short names ("busybox",
// "app:1", "localhost/app*").
func referenceMatches(pattern string, v *imageView) bool {
	if strings.HasPrefix(v.img.ID, strings.TrimPrefix(pattern, "sha256:")) && hexID.MatchString(strings.TrimPrefix(pattern, "sha256:")) {
		return true
	}
	for _, name := range v.img.Names {
		named, err := reference.ParseNormalizedNamed(name)
		if err != nil {
			continue
		}
		candidates := []string{named.String(), named.Name()}
		if !hasDomain(pattern) {
			familiar := reference.FamiliarString(named)
			familiarName := reference.FamiliarName(named)
			repoPath := reference.Path(named)
			candidates = append(candidates, familiar, familiarName, repoPath, strings.TrimPrefix(named.String(), reference.Domain(named)+"/"))
		}
		for _, c := range candidates {
			if ok, err := path.Match(pattern, c); err == nil && ok {
				return true
			}
		}
	}
	return false
}

// ParseTimestamp reads an absolute time (RFC 3339, a date, or Unix seconds)
// or a duration before now ("10m", "24h").
func ParseTimestamp(value string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(value); err == nil {
		return now.Add(-d), nil
	}
	if secs, err := strconv.ParseFloat(value, 64); err == nil && !math.IsNaN(secs) && !math.IsInf(secs, 0) {
		whole := int64(secs)
		return time.Unix(whole, int64((secs-float64(whole))*1e9)), nil
	}
	for _, layout := range []string{time.RFC3339Nano, time.RFC3339, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, value); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a timestamp or duration", value)
}
