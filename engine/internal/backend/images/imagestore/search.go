package imagestore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/containers/image/v5/docker"
	"github.com/containers/image/v5/docker/reference"
	"github.com/containers/image/v5/types"

	"github.com/berth-project/berth/engine/internal/core"
)

// Search asks each registry the term names (or, for a term without one,
// each unqualified-search registry of the engine's registries.conf, as
// Podman does) through containers/image's registry search: the v1 search
// endpoint where the registry has one, else its v2 catalog filtered by the
// term. With ListTags the term must name a repository, whose tags are
// listed instead.
func (t *Transfer) Search(ctx context.Context, opts core.SearchOptions) ([]core.SearchResult, error) {
	if opts.Limit < 0 || opts.Limit > core.MaxSearchLimit {
		return nil, core.InvalidArgument("limit", fmt.Errorf("%d is outside the range [1, %d]", opts.Limit, core.MaxSearchLimit))
	}
	limit := opts.Limit
	if limit == 0 {
		limit = core.DefaultSearchLimit
	}
	term := strings.TrimPrefix(opts.Term, "docker://")
	if term == "" {
		return nil, core.InvalidArgument("term", errors.New("a search term is required"))
	}
	registry, rest := splitSearchRegistry(term)
	registries := []string{registry}
	if registry == "" {
		registries = t.store.SearchRegistries()
	}
	sys, cleanup, err := t.registryContext(opts.Auth, opts.TLSVerify)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	if opts.ListTags {
		return t.searchTags(ctx, sys, registries, rest, limit)
	}
	var out []core.SearchResult
	var errs []error
	for _, reg := range registries {
		found, err := docker.SearchRegistry(ctx, sys, reg, rest, limit)
		if err != nil {
			errs = append(errs, classifyRegistryError(err))
			continue
		}
		n := 0
		for _, f := range found {
			r := core.SearchResult{Index: reg, Name: searchName(reg, f.Name), Description: f.Description,
				Stars: f.StarCount, Official: f.IsOfficial, Automated: f.IsAutomated}
			if n < limit && opts.Filters.Keep(r) {
				out = append(out, r)
				n++
			}
		}
	}
	// As Podman: one registry answering is enough; every one failing is
	// the search's error.
	if len(errs) > 0 && len(errs) == len(registries) {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// searchTags lists the tags of repo in the first registry that has it.
func (t *Transfer) searchTags(ctx context.Context, sys *types.SystemContext, registries []string, repo string, limit int) ([]core.SearchResult, error) {
	var errs []error
	for _, reg := range registries {
		named, err := reference.ParseNormalizedNamed(reg + "/" + repo)
		if err != nil {
			return nil, core.InvalidArgument("term", err)
		}
		if !reference.IsNameOnly(named) {
			return nil, core.InvalidArgument("term", fmt.Errorf("%q: listing tags needs a repository without a tag or digest", repo))
		}
		ref, err := docker.NewReference(reference.TagNameOnly(named))
		if err != nil {
			return nil, core.InvalidArgument("term", err)
		}
		tags, err := docker.GetRepositoryTags(ctx, sys, ref)
		if err != nil {
			errs = append(errs, classifyRegistryError(fmt.Errorf("listing tags of %s: %w", named.Name(), err)))
			continue
		}
		out := make([]core.SearchResult, 0, min(limit, len(tags)))
		for _, tag := range tags {
			if len(out) == limit {
				break
			}
			out = append(out, core.SearchResult{Index: reg, Name: named.Name(), Tag: tag})
		}
		return out, nil
	}
	return nil, errors.Join(errs...)
}

// splitSearchRegistry splits "REGISTRY/rest" where the first component
// names a registry (it holds a dot or a port, or is localhost); otherwise
// the registry is "" and the whole term is searched for.
func splitSearchRegistry(term string) (registry, rest string) {
	first, after, found := strings.Cut(term, "/")
	if found && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return first, after
	}
	return "", term
}

// searchName is the fully qualified name of a search hit: Docker Hub's
// official images answer a bare name, which is docker.io/library/NAME.
func searchName(registry, name string) string {
	if (registry == "docker.io" || registry == "index.docker.io") && !strings.Contains(name, "/") {
		return "docker.io/library/" + name
	}
	return registry + "/" + name
}
