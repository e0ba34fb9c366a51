package containers

import (
	"regexp"
	"strings"

	"github.com/containers/image/v5/docker/reference"

	"github.com/berth-project/berth/engine/internal/backend/images/imagestore"
	"github.com/berth-project/berth/engine/internal/core"
)

// hexPrefix matches a full or abbreviated image ID.
var hexPrefix = regexp.MustCompile(`^[a-f0-9]{1,64}$`)

// isIDOf reports whether v is img's ID or a prefix of it, with or without "sha256:".
func isIDOf(v, imageID string) bool {
	id := strings.TrimPrefix(v, "sha256:")
	return hexPrefix.MatchString(id) && strings.HasPrefix(imageID, id)
}

// imageNameFor is the name a container records for its image: the name the
// user gave, normalized ("localhost/app" becomes "localhost/app:latest"; a
// short name becomes the image's stored name it resolved to). An image given
// by ID is named by its first tag, or by the ID when it has no names.
func imageNameFor(given string, img *core.Image) string {
	if isIDOf(given, img.ID) {
		if len(img.RepoTags) > 0 {
			return img.RepoTags[0]
		}
		if len(img.Names) > 0 {
			return img.Names[0]
		}
		return given
	}
	ref, err := imagestore.ParseReference(given)
	if err != nil {
		return given
	}
	if !ref.Short {
		return ref.Named.String()
	}
	var match string
	for _, name := range img.Names {
		if shortNameMatches(ref, name) && (match == "" || strings.HasPrefix(name, "localhost/")) {
			match = name
		}
	}
	if match != "" {
		return match
	}
	return ref.Named.String()
}

// shortNameMatches reports whether the stored (fully qualified) name is one a
// short reference stands for: its repository path is the short path, or ends
// in "/" + it, and tag or digest are the same.
func shortNameMatches(ref imagestore.Reference, name string) bool {
	named, err := reference.ParseNormalizedNamed(name)
	if err != nil {
		return false
	}
	named = reference.TagNameOnly(named)
	path := reference.Path(named)
	if path != ref.Path && !strings.HasSuffix(path, "/"+ref.Path) {
		return false
	}
	return tagOrDigest(named) == tagOrDigest(ref.Named)
}

func tagOrDigest(n reference.Named) string {
	var s string
	if t, ok := n.(reference.Tagged); ok {
		s = ":" + t.Tag()
	}
	if d, ok := n.(reference.Digested); ok {
		s += "@" + d.Digest().String()
	}
	return s
}

// ancestorMatches reports whether the container's image is v: its image ID
// (or a prefix), or the same reference after normalization, where a short v
// ("bb", "qa/bb:1") matches any registry and a missing tag means latest.
func ancestorMatches(r *record, v string) bool {
	if v == "" {
		return false
	}
	if isIDOf(v, r.ImageID) || r.Image == v {
		return true
	}
	want, err := imagestore.ParseReference(v)
	if err != nil {
		return false
	}
	have, err := reference.ParseNormalizedNamed(r.Image)
	if err != nil {
		return false
	}
	have = reference.TagNameOnly(have)
	if have.String() == want.Named.String() {
		return true
	}
	return want.Short && shortNameMatches(want, have.String())
}
