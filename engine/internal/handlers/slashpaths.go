package handlers

import (
	"net/http"
	"sort"
	"strings"

	"github.com/go-chi/chi/v5"
)

// slashRoute is a route pattern with at least one {param:.*} segment, split
// into segments.
type slashRoute struct {
	method   string
	segments []string
}

// slashPaths lets {name:.*} parameters span several path segments, as image
// references do ("quay.io/org/app:1"). Podman's client escapes the slashes
// (%2F), which the router matches as one segment; a client that sends some
// or all of them unescaped gets its path re-escaped here, before routing, when it matches a
// registered wildcard route. The patterns come from the router itself.
func slashPaths(mux *chi.Mux) http.Handler {
	var routes []slashRoute
	_ = chi.Walk(mux, func(method, pattern string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if strings.Contains(pattern, ":.*}") {
			routes = append(routes, slashRoute{method: method, segments: strings.Split(strings.TrimPrefix(pattern, "/"), "/")})
		}
		return nil
	})
	longestFirst(routes)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A path may mix both forms (podman escapes the list's name, a
		// curl user may not escape the push destination): only the
		// unescaped slashes of wildcard parts are escaped.
		if escaped, ok := escapeWildcards(routes, r.Method, r.URL.EscapedPath()); ok {
			r.URL.RawPath = escaped
		}
		mux.ServeHTTP(w, r)
	})
}

// longestFirst orders routes so that longer patterns are tried first:
// "/manifests/{name:.*}/add" must win over "/manifests/{name:.*}" for a
// name without slashes.
func longestFirst(routes []slashRoute) {
	sort.SliceStable(routes, func(i, j int) bool { return len(routes[i].segments) > len(routes[j].segments) })
}

// escapeWildcards rewrites path so that the parts matched by {param:.*}
// segments of the first matching route have their slashes escaped.
func escapeWildcards(routes []slashRoute, method, path string) (string, bool) {
	if !strings.HasPrefix(path, "/") {
		return "", false
	}
	segments := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for _, route := range routes {
		if route.method != method {
			continue
		}
		if out, ok := matchSegments(route.segments, segments); ok {
			if len(out) == len(segments) {
				return "", false
			}
			return "/" + strings.Join(out, "/"), true
		}
	}
	return "", false
}

// matchSegments matches path segments against pattern segments; a {x:.*}
// segment takes one or more path segments (fewest first). It returns the path
// with each wildcard's segments joined by %2F.
func matchSegments(pattern, path []string) ([]string, bool) {
	if len(pattern) == 0 {
		return nil, len(path) == 0
	}
	if len(path) == 0 {
		return nil, false
	}
	head := pattern[0]
	switch {
	case strings.HasPrefix(head, "{") && strings.HasSuffix(head, ":.*}"):
		// A wildcard spans one or more segments that start and end
		// non-empty; empty ones between are kept ("docker://host/name",
		// a push destination as curl users write it).
		if path[0] == "" {
			return nil, false
		}
		for n := 1; n <= len(path); n++ {
			if path[n-1] == "" {
				continue
			}
			if rest, ok := matchSegments(pattern[1:], path[n:]); ok {
				return append([]string{strings.Join(path[:n], "%2F")}, rest...), true
			}
		}
		return nil, false
	case strings.Contains(head, "{"):
		// A one-segment parameter, possibly after a static prefix ("v{version}").
		static := head[:strings.Index(head, "{")]
		if len(path[0]) <= len(static) || !strings.HasPrefix(path[0], static) {
			return nil, false
		}
	case head != path[0]:
		return nil, false
	}
	rest, ok := matchSegments(pattern[1:], path[1:])
	if !ok {
		return nil, false
	}
	return append([]string{path[0]}, rest...), true
}
