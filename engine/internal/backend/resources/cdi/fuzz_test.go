package cdi

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// FuzzSpecFile: whatever a spec file holds, the registry loads it or names
// why not, never panics, and keeps serving the good spec beside it.
func FuzzSpecFile(f *testing.F) {
	f.Add(exampleSpec)
	f.Add(`{"cdiVersion": "0.6.0", "kind": 7}`)
	f.Add("cdiVersion: \"0.6.0\"\nkind: a.com/b\ndevices:\n- name: x\n  containerEdits:\n    mounts: [{hostPath: /tmp}]\n")
	f.Add("- [")
	f.Fuzz(func(t *testing.T, content string) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "good.yaml"), []byte(exampleSpec), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "fuzzed.yaml"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		diagnose(filepath.Join(dir, "fuzzed.yaml"))
		r := Open([]string{dir})
		r.Info(t.Context())
		if _, err := r.Resolve([]string{"example.com/dev=zero"}); err != nil && !conflicts(r) {
			t.Fatalf("the good spec is not served beside %q: %v", content, err)
		}
	})
}

// conflicts reports whether the fuzzed spec defined a device of the good
// spec's kind too (then neither is served, as the library decides).
func conflicts(r *Registry) bool {
	for _, e := range r.Info(context.Background()).Errors {
		if len(e.Error) > 0 && filepath.Base(e.Spec) == "good.yaml" {
			return true
		}
	}
	return false
}
