package handlers

import (
	"strings"
	"testing"
)

func testSlashRoutes() []slashRoute {
	var routes []slashRoute
	for _, r := range []struct{ method, pattern string }{
		{"GET", "/v{version}/libpod/images/{name:.*}/json"},
		{"GET", "/libpod/images/{name:.*}/json"},
		{"DELETE", "/libpod/images/{name:.*}"},
		{"POST", "/libpod/manifests/{name:.*}/registry/{destination:.*}"},
		{"GET", "/libpod/containers/{name}/json"},
	} {
		routes = append(routes, slashRoute{method: r.method, segments: strings.Split(strings.TrimPrefix(r.pattern, "/"), "/")})
	}
	return routes
}

func TestEscapeWildcards(t *testing.T) {
	cases := []struct {
		method, path, want string
	}{
		{"GET", "/v4.3.1/libpod/images/quay.io/org/app:1/json", "/v4.3.1/libpod/images/quay.io%2Forg%2Fapp:1/json"},
		{"GET", "/libpod/images/a/b/json", "/libpod/images/a%2Fb/json"},
		{"GET", "/libpod/images/busybox/json", ""},
		{"GET", "/libpod/images/json", ""},
		{"DELETE", "/libpod/images/localhost/app:1", "/libpod/images/localhost%2Fapp:1"},
		{"POST", "/libpod/manifests/a/b/registry/c/d", "/libpod/manifests/a%2Fb/registry/c%2Fd"},
		{"POST", "/libpod/manifests/localhost:5000/a/b:tag/registry/docker://localhost:5000/x/y:1", "/libpod/manifests/localhost:5000%2Fa%2Fb:tag/registry/docker:%2F%2Flocalhost:5000%2Fx%2Fy:1"},
		{"POST", "/libpod/manifests/localhost:5000%2Fa:1/registry/localhost:5000/x/y:1", "/libpod/manifests/localhost:5000%2Fa:1/registry/localhost:5000%2Fx%2Fy:1"},
		{"POST", "/libpod/manifests//a/registry/b", ""},
		{"POST", "/libpod/manifests/a/registry/b/", ""},
		{"GET", "/libpod/containers/a/b/json", ""},
		{"GET", "/libpod/images//json", ""},
		{"PUT", "/libpod/images/a/b/json", ""},
	}
	routes := testSlashRoutes()
	for _, c := range cases {
		got, ok := escapeWildcards(routes, c.method, c.path)
		if (c.want != "") != ok || got != c.want {
			t.Errorf("%s %s: got %q (%v), want %q", c.method, c.path, got, ok, c.want)
		}
	}
}

// TestLongerRoutesFirst: a suffix route wins over the bare wildcard route
// registered before it, so "/manifests/x/add" is not read as the list "x/add".
func TestLongerRoutesFirst(t *testing.T) {
	var routes []slashRoute
	for _, pattern := range []string{"/libpod/manifests/{name:.*}", "/libpod/manifests/{name:.*}/add"} {
		routes = append(routes, slashRoute{method: "POST", segments: strings.Split(strings.TrimPrefix(pattern, "/"), "/")})
	}
	longestFirst(routes)
	if got, ok := escapeWildcards(routes, "POST", "/libpod/manifests/x/add"); ok {
		t.Errorf("/libpod/manifests/x/add was rewritten to %q", got)
	}
	if got, _ := escapeWildcards(routes, "POST", "/libpod/manifests/a/b/add"); got != "/libpod/manifests/a%2Fb/add" {
		t.Errorf("/libpod/manifests/a/b/add became %q", got)
	}
}

func FuzzEscapeWildcards(f *testing.F) {
	for _, seed := range []string{"/libpod/images/a/b/json", "/v1/libpod/images/x", "/", "", "//", "/libpod/manifests/a/registry/b/c"} {
		f.Add("GET", seed)
		f.Add("DELETE", seed)
	}
	routes := testSlashRoutes()
	f.Fuzz(func(t *testing.T, method, path string) {
		got, ok := escapeWildcards(routes, method, path)
		if !ok {
			return
		}
		// Re-escaping only joins segments: unescaping the slashes gives the path back.
		if strings.ReplaceAll(got, "%2F", "/") != path {
			t.Fatalf("%q became %q", path, got)
		}
	})
}
