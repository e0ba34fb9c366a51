package architecture

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/engine/internal/testsupport/testdeadline"
)

// module is the engine's module path; imports outside it are not checked.
const module = "github.com/berth-project/berth/engine/"

// floors ranks every package of the engine, by path prefix (the longest
// prefix wins): a package may import packages of a lower floor and packages
// of its own backend group, nothing else. docs/engine/architecture.md draws
// the same floors.
var floors = map[string]int{
	"api":                         0,
	"testimage":                   0,
	"internal/core":               0,
	"internal/backend/platform/":  1,
	"internal/backend/execution/": 2,
	"internal/backend/resources/": 2,
	"internal/backend/images/":    3, // build runs its containers through execution
	"internal/backend/lifecycle/": 4,
	"internal/backend/system":     5, // composes the stores below it
	"internal/backend/deploy/":    5,
	"internal/httpwire":           5, // the wire plumbing both front doors share
	"internal/handlers":           6,
	"internal/dockerapi":          6, // Docker's front door, beside handlers
	"internal/engine":             7,
	"cmd/":                        8,
	"internal/testsupport/":       8,
	// testdeadline, poll, criutest, tartest, need, freezertest and
	// benchtest import nothing of the engine: every test may use them.
	"internal/testsupport/testdeadline": 0,
	"internal/testsupport/benchtest":    0,
	"internal/testsupport/poll":         0,
	"internal/testsupport/criutest":     0,
	"internal/testsupport/tartest":      0,
	"internal/testsupport/need":         0,
	"internal/testsupport/freezertest":  0,
	"internal/integration/":             9,
	"internal/architecture":             9,
}

// upward are the imports allowed to reach up a floor, each with its reason.
var upward = map[[2]string]string{
	{"internal/backend/execution/containerio", "internal/backend/lifecycle/exec"}: "the glue that turns exec sessions into attach streams",
}

// handlerBackends are the backend packages handlers may import: the stream
// formats and helpers they write to the wire. Everything else they reach
// through core.
var handlerBackends = []string{
	"internal/backend/execution/containerio",
	"internal/backend/execution/logs",
	"internal/backend/execution/stats",
	"internal/backend/execution/stream",
	"internal/backend/execution/top",
	"internal/backend/lifecycle/exec",
	"internal/backend/lifecycle/restart",
	"internal/backend/platform/events",
	"internal/backend/platform/sizelimit",
}

func floorOf(pkg string) (int, bool) {
	best, floor := "", 0
	for prefix, f := range floors {
		var match bool
		if strings.HasSuffix(prefix, "/") {
			match = strings.HasPrefix(pkg, prefix)
		} else {
			match = pkg == prefix || strings.HasPrefix(pkg, prefix+"/")
		}
		if match && len(prefix) > len(best) {
			best, floor = prefix, f
		}
	}
	return floor, best != ""
}

// group is a backend package's group (internal/backend/lifecycle for
// internal/backend/lifecycle/pods), or the package itself.
func group(pkg string) string {
	if rest, ok := strings.CutPrefix(pkg, "internal/backend/"); ok {
		g, _, _ := strings.Cut(rest, "/")
		return "internal/backend/" + g
	}
	return pkg
}

// imports reads the engine's packages (non-test files only) and what each
// imports of the engine.
func imports(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(rel)
		if _, ok := out[pkg]; !ok {
			out[pkg] = nil
		}
		for _, spec := range f.Imports {
			p, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return err
			}
			if q, ok := strings.CutPrefix(p, module); ok && !slices.Contains(out[pkg], q) {
				out[pkg] = append(out[pkg], q)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// violations lists what breaks the floors in graph (package -> the engine
// packages it imports): an import that reaches up a floor, a handler that
// imports a backend outside handlerBackends, a package no floor names.
func violations(graph map[string][]string) []string {
	var out []string
	pkgs := make([]string, 0, len(graph))
	for p := range graph {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		pf, ok := floorOf(p)
		if !ok {
			out = append(out, p+": on no floor; add it to floors (and to docs/engine/architecture.md)")
			continue
		}
		for _, q := range graph[p] {
			qf, ok := floorOf(q)
			switch {
			case !ok:
				out = append(out, fmt.Sprintf("%s imports %s, which is on no floor", p, q))
			case (p == "internal/handlers" || p == "internal/dockerapi") && strings.HasPrefix(q, "internal/backend/"):
				if !slices.Contains(handlerBackends, q) {
					out = append(out, fmt.Sprintf("handlers import %s: handlers reach backends through core (only the stream packages in handlerBackends are theirs to import)", q))
				}
			case qf < pf, group(p) == group(q) && strings.HasPrefix(p, "internal/backend/"):
			case upward[[2]string{p, q}] != "":
			default:
				out = append(out, fmt.Sprintf("%s (floor %d) imports %s (floor %d): an import up a floor (see docs/engine/architecture.md)", p, pf, q, qf))
			}
		}
	}
	return out
}

// TestImportsFollowTheFloors checks the engine's real imports.
func TestImportsFollowTheFloors(t *testing.T) {
	testdeadline.Set(t, time.Minute)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("engine module root: %v", err)
	}
	graph := imports(t, root)
	if len(graph["internal/engine"]) < 20 {
		t.Fatalf("read %d packages under %s; internal/engine imports %d of them, expected every backend", len(graph), root, len(graph["internal/engine"]))
	}
	for _, v := range violations(graph) {
		t.Error(v)
	}
}

// TestViolationsAreFound feeds the check imports that break the floors,
// among them the one backend/system was moved to end (the ground floor's
// system service importing the image store).
func TestViolationsAreFound(t *testing.T) {
	graph := map[string][]string{
		"internal/core":                         nil,
		"internal/backend/platform/system":      {"internal/backend/images/imagestore", "internal/core"},
		"internal/backend/images/imagestore":    {"internal/core", "internal/backend/platform/sizelimit"},
		"internal/backend/platform/sizelimit":   {"internal/core"},
		"internal/backend/lifecycle/pods":       {"internal/backend/lifecycle/containers", "internal/backend/system"},
		"internal/backend/lifecycle/containers": {"internal/backend/images/imagestore"},
		"internal/backend/system":               {"internal/backend/images/imagestore"},
		"internal/handlers":                     {"internal/core", "internal/backend/execution/logs", "internal/backend/images/imagestore"},
		"internal/backend/execution/logs":       nil,
		"internal/core/wire":                    {"internal/handlers"},
		"internal/newthing":                     nil,
	}
	want := []string{
		"internal/backend/lifecycle/pods (floor 4) imports internal/backend/system (floor 5): an import up a floor (see docs/engine/architecture.md)",
		"internal/backend/platform/system (floor 1) imports internal/backend/images/imagestore (floor 3): an import up a floor (see docs/engine/architecture.md)",
		"internal/core/wire (floor 0) imports internal/handlers (floor 6): an import up a floor (see docs/engine/architecture.md)",
		"handlers import internal/backend/images/imagestore: handlers reach backends through core (only the stream packages in handlerBackends are theirs to import)",
		"internal/newthing: on no floor; add it to floors (and to docs/engine/architecture.md)",
	}
	got := violations(graph)
	if !slices.Equal(got, want) {
		t.Fatalf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestCoreIsFreeOfHTTP: core speaks the engine's domain (its types, its
// errors) and nothing of the wire; HTTP is the handlers' (the brief's rule).
func TestCoreIsFreeOfHTTP(t *testing.T) {
	testdeadline.Set(t, time.Minute)
	files, err := filepath.Glob("../core/*.go")
	if err != nil || len(files) < 10 {
		t.Fatalf("core's files: %v %v", files, err)
	}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, spec := range f.Imports {
			if p, _ := strconv.Unquote(spec.Path.Value); p == "net/http" || strings.HasPrefix(p, "net/http/") {
				t.Errorf("%s imports %s: core carries no HTTP (map statuses onto core's errors where the wire is read)", filepath.Base(path), p)
			}
		}
	}
}
