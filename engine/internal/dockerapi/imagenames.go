package dockerapi

import (
	"strings"

	"github.com/containers/image/v5/docker/reference"
)

// familiarImageName is an image name as dockerd shows it: Docker Hub's
// docker.io/ and library/ left out ("alpine:3", "myrepo/app:v1"); a name
// on another registry is shown whole. Storage records names fully
// qualified, and scripts that read `docker images --format` or RepoTags
// compare them with what they pulled.
func familiarImageName(name string) string {
	named, err := reference.ParseNormalizedNamed(name)
	if err != nil {
		return name
	}
	return reference.FamiliarString(named)
}

// familiarImageNames are names in dockerd's form, never nil.
func familiarImageNames(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, familiarImageName(n))
	}
	return out
}

// matchingImageNames keeps the names (familiar) that one of patterns
// matches as dockerd's reference filter matches them: a shell pattern
// against the familiar name with its tag or digest, or without.
func matchingImageNames(names, patterns []string) []string {
	out := []string{}
	for _, n := range names {
		ref, err := reference.ParseNormalizedNamed(n)
		if err != nil {
			continue
		}
		for _, p := range patterns {
			if ok, _ := reference.FamiliarMatch(p, ref); ok {
				out = append(out, n)
				break
			}
		}
	}
	return out
}

// missingImageName is name as dockerd's "No such image" words it: a
// reference familiar and tagged ("nosuch:latest"), an ID as given.
func missingImageName(name string) string {
	if strings.HasPrefix(name, "sha256:") {
		return name
	}
	named, err := reference.ParseNormalizedNamed(name)
	if err != nil {
		return name
	}
	return reference.FamiliarString(reference.TagNameOnly(named))
}

// dockerHubNames are the names a client gives, as dockerd stores them: one
// without a registry on Docker Hub ("myapp" is docker.io/library/myapp,
// where the engine's own rule, Podman's, puts it under localhost/). A name
// that does not parse is passed on for the builder to refuse.
func dockerHubNames(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if named, err := reference.ParseNormalizedNamed(n); err == nil {
			n = named.String()
		}
		out = append(out, n)
	}
	return out
}
