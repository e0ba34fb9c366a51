package handlers

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestEveryRouteIsDocumented reads the route registrations of this package
// and checks that engine/api/swagger.yaml documents each path and method,
// so the served OpenAPI document describes what the engine really serves.
func TestEveryRouteIsDocumented(t *testing.T) {
	spec, err := os.ReadFile(filepath.Join("..", "..", "api", "swagger.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	documented := swaggerOperations(t, spec)
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	registration := regexp.MustCompile(`r\.(Get|Post|Put|Delete|Head|Patch)\("([^"]+)"`)
	param := regexp.MustCompile(`\{(\w+):[^}]*\}`)
	checked := 0
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range registration.FindAllStringSubmatch(string(src), -1) {
			method, path := strings.ToLower(m[1]), param.ReplaceAllString(m[2], "{$1}")
			checked++
			if !documented[path][method] {
				t.Errorf("%s: %s %s is served but not in engine/api/swagger.yaml", file, strings.ToUpper(method), path)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("found only %d route registrations; the pattern no longer matches routes.go's style", checked)
	}
}

// swaggerOperations parses the Swagger 2 document (a document that does not
// parse fails the test) and returns its paths' methods.
func swaggerOperations(t *testing.T, spec []byte) map[string]map[string]bool {
	t.Helper()
	var doc struct {
		Swagger string                    `json:"swagger"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	if err := yaml.Unmarshal(spec, &doc); err != nil {
		t.Fatalf("engine/api/swagger.yaml: %v", err)
	}
	if doc.Swagger != "2.0" {
		t.Fatalf("engine/api/swagger.yaml: swagger is %q, want 2.0", doc.Swagger)
	}
	out := map[string]map[string]bool{}
	for path, methods := range doc.Paths {
		out[path] = map[string]bool{}
		for method := range methods {
			out[path][method] = true
		}
	}
	return out
}
