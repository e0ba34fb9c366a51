package files

import (
	"io/fs"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzValidatePath checks that whatever ValidatePath and FromEscaped accept is a valid
// io/fs path (or the root) free of backslashes, NUL and percent-encoded escapes.
func FuzzValidatePath(f *testing.F) {
	for _, s := range []string{"", ".", "a/b", "..", "a//b", "/a", "a\x00", "a\\b", "%2e%2e", "%252e", "a%2fb", "ü/ß"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		check := func(name, got string) {
			if got == Root {
				return
			}
			if !fs.ValidPath(got) || strings.ContainsAny(got, "\\\x00") {
				t.Fatalf("%s(%q) accepted invalid %q", name, p, got)
			}
			d := got
			for range maxUnescapeRounds {
				next, err := url.PathUnescape(d)
				if err != nil || next == d {
					break
				}
				if !fs.ValidPath(next) || strings.ContainsAny(next, "\\\x00") || strings.Count(next, "/") != strings.Count(got, "/") {
					t.Fatalf("%s(%q) accepted %q that decodes to %q", name, p, got, next)
				}
				d = next
			}
		}
		if got, err := ValidatePath(p); err == nil {
			if got != p && !(p == "" && got == Root) {
				t.Fatalf("ValidatePath(%q) changed the path to %q", p, got)
			}
			check("ValidatePath", got)
		}
		if got, err := FromEscaped(p); err == nil {
			check("FromEscaped", got)
		}
	})
}

// FuzzTreePut writes to whatever path FromEscaped accepts and checks that the file
// lands inside the upload's tree, where Stat and Open find it, and nowhere else.
func FuzzTreePut(f *testing.F) {
	for _, s := range []string{"a", "a/b/c", "..", "%2e%2e/x", "a%2fb", "x/%252e%252e", "d%20e/f", "ü"} {
		f.Add(s)
	}
	dataDir := f.TempDir()
	tr, err := New(dataDir)
	if err != nil {
		f.Fatal(err)
	}
	const id = "7d3c1a52-0c9e-4a53-9d8b-2f6f7f3c9e10"
	f.Fuzz(func(t *testing.T, escaped string) {
		rel, err := FromEscaped(escaped)
		if err != nil || rel == Root {
			return
		}
		if err := tr.Remove(id); err != nil {
			t.Fatal(err)
		}
		if err := tr.Create(id); err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Put(id, rel, strings.NewReader("data"), 4, 4, &usage{}); err != nil {
			t.Fatalf("Put(%q) of a valid path: %v", rel, err)
		}
		var found []string
		_ = filepath.WalkDir(dataDir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() && d.Name() != intentFile {
				found = append(found, p)
			}
			return nil
		})
		want := filepath.Join(tr.Dir(id), filepath.FromSlash(rel))
		if len(found) != 1 || found[0] != want {
			t.Fatalf("Put(%q) wrote %v, want only %s", rel, found, want)
		}
		if info, err := tr.Stat(id, rel, "", 1); err != nil || info.Size != 4 {
			t.Fatalf("Stat(%q) = %+v, %v", rel, info, err)
		}
	})
}
