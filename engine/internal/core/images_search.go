package core

import (
	"fmt"
	"strconv"
)

// SearchOptions are the parameters of an image search (podman search,
// docker search).
type SearchOptions struct {
	// Term is what to look for, optionally prefixed by a registry
	// ("localhost:5000/busybox"); without one, every unqualified-search
	// registry of the engine's registries.conf is searched.
	Term string
	// Limit bounds the results per registry (0 means DefaultSearchLimit).
	Limit int
	// Filters keep only the results that pass them.
	Filters SearchFilters
	// ListTags lists the tags of Term, which must then name a repository,
	// instead of searching.
	ListTags bool
	// TLSVerify, when not nil, overrides the registries configuration.
	TLSVerify *bool
	// Auth are the client's credentials, if any.
	Auth *RegistryAuth
}

// DefaultSearchLimit is Podman's and Docker's default number of results
// per registry; MaxSearchLimit is the most dockerd accepts.
const (
	DefaultSearchLimit = 25
	MaxSearchLimit     = 100
)

// SearchFilters are the search filters Podman and Docker share.
type SearchFilters struct {
	// Stars keeps results with at least this many stars.
	Stars int
	// IsOfficial and IsAutomated, when set, keep the results whose flag
	// has that value.
	IsOfficial, IsAutomated *bool
}

// Keep reports whether r passes the filters.
func (f SearchFilters) Keep(r SearchResult) bool {
	return r.Stars >= f.Stars && (f.IsOfficial == nil || *f.IsOfficial == r.Official) &&
		(f.IsAutomated == nil || *f.IsAutomated == r.Automated)
}

// ParseSearchFilters reads the filters both APIs send (stars,
// is-official, is-automated); another name or a malformed value is
// ErrInvalidArgument naming it, never ignored.
func ParseSearchFilters(raw map[string][]string) (SearchFilters, error) {
	var f SearchFilters
	for name, values := range raw {
		if len(values) == 0 {
			continue
		}
		v := values[len(values)-1]
		switch name {
		case "stars":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return f, InvalidArgument("filters", fmt.Errorf("stars=%q is not a non-negative integer", v))
			}
			f.Stars = n
		case "is-official", "is-automated":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return f, InvalidArgument("filters", fmt.Errorf("%s=%q is not a boolean", name, v))
			}
			if name == "is-official" {
				f.IsOfficial = &b
			} else {
				f.IsAutomated = &b
			}
		default:
			return f, InvalidArgument("filters", fmt.Errorf("invalid filter %q (stars, is-official and is-automated are supported)", name))
		}
	}
	return f, nil
}

// SearchResult is one image a registry answered a search with (or, with
// ListTags, one tag of the repository).
type SearchResult struct {
	// Index is the registry that answered.
	Index string
	// Name is the image's fully qualified name (registry/repository).
	Name        string
	Description string
	Stars       int
	Official    bool
	Automated   bool
	// Tag is set only when tags were listed.
	Tag string
}

// DistributionOptions are the parameters of a registry manifest lookup
// (Docker's GET /distribution/{name}/json).
type DistributionOptions struct {
	// TLSVerify, when not nil, overrides the registries configuration.
	TLSVerify *bool
	// Auth are the client's credentials, if any.
	Auth *RegistryAuth
}

// Distribution is what a registry says of a reference without pulling
// it: the descriptor of its manifest (or manifest list) and the platforms
// it offers.
type Distribution struct {
	MediaType string
	Digest    string
	Size      int64
	Platforms []Platform
}

// Platform is one platform an image offers.
type Platform struct {
	OS, Architecture, Variant, OSVersion string
	OSFeatures                           []string
}
