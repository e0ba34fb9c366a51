package handlers

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEveryRouteIsDocumented reads the route registrations of this package
// and checks that engine/api/swagger.yaml documents each path and method,
// so the served OpenAPI document describes what the engine really serves.
func TestEveryRouteIsDocumented(t *testing.T) {
	spec, err := os.ReadFile(filepath.Join("..", "..", "api", "swagger.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	documented := swaggerOperations(string(spec))
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

// swaggerOperations reads the paths section of a Swagger 2 document written in
// this repository's style: two-space indented paths, four-space methods.
func swaggerOperations(spec string) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	inPaths := false
	current := ""
	for _, line := range strings.Split(spec, "\n") {
		switch {
		case line == "paths:":
			inPaths = true
		case inPaths && len(line) > 0 && line[0] != ' ':
			inPaths = false
		case inPaths && strings.HasPrefix(line, "  /") && strings.HasSuffix(line, ":"):
			current = strings.TrimSuffix(strings.TrimSpace(line), ":")
			out[current] = map[string]bool{}
		case inPaths && current != "" && strings.HasPrefix(line, "    ") && !strings.HasPrefix(line, "     ") && strings.HasSuffix(line, ":"):
			out[current][strings.TrimSuffix(strings.TrimSpace(line), ":")] = true
		}
	}
	return out
}
