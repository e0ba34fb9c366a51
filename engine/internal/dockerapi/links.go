package dockerapi

import (
	"context"
	"fmt"
	"strings"

	"github.com/berth-project/berth/engine/internal/core"
)

// Legacy links (docker run --link, Compose's links and, in Compose v1,
// every service's one-off runs): the engine writes each linked container's
// address into the linking container's /etc/hosts (see core.ContainerLink).

// parseLinks reads Docker's link strings: "name", "name:alias", or the
// "/name:/parent/alias" form inspect shows (which clients send back when
// they copy a container's host config).
func parseLinks(field string, links []string) ([]core.ContainerLink, error) {
	var out []core.ContainerLink
	for _, l := range links {
		name, alias, ok := strings.Cut(l, ":")
		if strings.Contains(alias, ":") || name == "" || (ok && alias == "") {
			return nil, core.InvalidArgument(field, fmt.Errorf("%q is not NAME or NAME:ALIAS", l))
		}
		if !ok {
			alias = name
		}
		if strings.HasPrefix(name, "/") {
			name = name[1:]
			alias = alias[strings.LastIndex(alias, "/")+1:]
		}
		out = append(out, core.ContainerLink{Container: name, Alias: strings.TrimPrefix(alias, "/")})
	}
	return out, nil
}

// addLinks merges links into a spec's: the same container under the same
// alias once (Compose v1 sends its links twice, in the host config and the
// endpoint's).
func addLinks(have []core.ContainerLink, more []core.ContainerLink) []core.ContainerLink {
	for _, l := range more {
		dup := false
		for _, h := range have {
			dup = dup || h == l
		}
		if !dup {
			have = append(have, l)
		}
	}
	return have
}

// inspectLinks is HostConfig.Links as dockerd shows it:
// "/linked:/container/alias", for the linked containers that still exist.
func (s *server) inspectLinks(ctx context.Context, c *core.Container) []string {
	var out []string
	for _, l := range c.Spec.Links {
		linked, err := s.deps.Containers.Lookup(ctx, l.Container)
		if err != nil {
			continue
		}
		out = append(out, "/"+linked.Name+":/"+c.Name+"/"+l.Alias)
	}
	return out
}
